//! Elementwise arithmetic, comparison, logic, casts and unary math.

use crate::error::Result;
use crate::frontend::build::{self, FLOATS, elementwise as ew, unary as un};
use crate::frontend::ctx::Ctx;
use crate::ir::dim::Dim;
use crate::ir::expr::{self, BinOp, E, UnOp};
use crate::ir::{DType, Op, Scalar, TypeInfo, ValueId};

/// Before opset 7, binary ops broadcast only with `broadcast=1`, aligning B to A at `axis`.
fn legacy_operands(ctx: &mut Ctx) -> Result<(ValueId, ValueId)> {
    let a = ctx.input(0)?;
    let mut b = ctx.input(1)?;
    if ctx.opset < 7 && ctx.attr_i_or("broadcast", 0)? == 1 {
        let ra = ctx.rank(a);
        let sb = ctx.shape(b);
        let axis = match ctx.attr_i("axis")? {
            Some(x) => build::axis(ctx, x, ra)?,
            None => ra - sb.len(),
        };
        if axis + sb.len() > ra {
            return Err(ctx.err(format!(
                "legacy broadcast: B of rank {} does not fit A of rank {ra} at axis {axis}",
                sb.len()
            )));
        }
        let mut shape = vec![Dim::Known(1); axis];
        shape.extend(sb);
        shape.resize(ra, Dim::Known(1));
        b = ctx.reshape(b, shape)?;
    }
    Ok((a, b))
}

fn check_same_type(ctx: &Ctx, a: ValueId, b: ValueId) -> Result<DType> {
    let (ta, tb) = (ctx.dtype(a), ctx.dtype(b));
    if ta != tb {
        return Err(ctx.err(format!("operands have different types {ta} and {tb}")));
    }
    Ok(ta)
}

fn binary(ctx: &mut Ctx, op: BinOp) -> Result<Vec<ValueId>> {
    let (a, b) = legacy_operands(ctx)?;
    let dt = check_same_type(ctx, a, b)?;
    if dt == DType::Bool && !matches!(op, BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Eq) {
        return Err(ctx.err(format!("{:?} is not defined for bool", op)));
    }
    let out = if op.is_comparison() { DType::Bool } else { dt };
    Ok(vec![ew(ctx, &[a, b], out, |l| {
        expr::binary(op, l[0].clone(), l[1].clone())
    })?])
}

pub fn add(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Add)
}
pub fn sub(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Sub)
}
pub fn mul(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Mul)
}
pub fn div(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Div)
}
pub fn equal(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if ctx.dtype(a) == DType::Str && ctx.dtype(b) == DType::Str {
        return Ok(vec![string_equal(ctx, a, b)?]);
    }
    binary(ctx, BinOp::Eq)
}

/// Equal on strings (opset 19): both operands broadcast by moving their pointers, then
/// compared by the runtime (`kernels::StrEqual`).
fn string_equal(ctx: &mut Ctx, a: ValueId, b: ValueId) -> Result<ValueId> {
    let (operands, out) = build::broadcast_all(ctx, &[a, b])?;
    ctx.add(
        Op::kernel(crate::kernels::StrEqual),
        operands,
        TypeInfo::new(DType::Bool, out),
    )
}
pub fn less(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Lt)
}
pub fn less_or_equal(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Le)
}
pub fn greater(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Gt)
}
pub fn greater_or_equal(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    binary(ctx, BinOp::Ge)
}
pub fn and(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    logical(ctx, BinOp::And)
}
pub fn or(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    logical(ctx, BinOp::Or)
}
pub fn xor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    logical(ctx, BinOp::Xor)
}

fn logical(ctx: &mut Ctx, op: BinOp) -> Result<Vec<ValueId>> {
    let (a, b) = legacy_operands(ctx)?;
    build::expect_types(ctx, a, "input A", &[DType::Bool])?;
    build::expect_types(ctx, b, "input B", &[DType::Bool])?;
    Ok(vec![ew(ctx, &[a, b], DType::Bool, |l| {
        expr::binary(op, l[0].clone(), l[1].clone())
    })?])
}

fn bitwise(ctx: &mut Ctx, op: BinOp) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dt = check_same_type(ctx, a, b)?;
    if !dt.is_int() {
        return Err(ctx.err(format!("bitwise ops need integer operands, got {dt}")));
    }
    Ok(vec![ew(ctx, &[a, b], dt, |l| {
        expr::binary(op, l[0].clone(), l[1].clone())
    })?])
}

pub fn bitwise_and(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    bitwise(ctx, BinOp::BitAnd)
}
pub fn bitwise_or(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    bitwise(ctx, BinOp::BitOr)
}
pub fn bitwise_xor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    bitwise(ctx, BinOp::BitXor)
}
pub fn bitwise_not(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    if !dt.is_int() {
        return Err(ctx.err(format!("BitwiseNot needs an integer operand, got {dt}")));
    }
    Ok(vec![un(ctx, x, dt, |v| expr::unary(UnOp::BitNot, v))?])
}

pub fn bit_shift(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let dir = ctx
        .attr_s("direction")?
        .ok_or_else(|| ctx.err("attribute 'direction' is required"))?;
    let op = match dir.as_str() {
        "LEFT" => BinOp::Shl,
        "RIGHT" => BinOp::Shr,
        other => {
            return Err(ctx.err(format!(
                "attribute 'direction' must be LEFT or RIGHT, got '{other}'"
            )));
        }
    };
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dt = check_same_type(ctx, a, b)?;
    if !dt.is_int() {
        return Err(ctx.err(format!("BitShift needs integer operands, got {dt}")));
    }
    Ok(vec![ew(ctx, &[a, b], dt, |l| {
        expr::binary(op, l[0].clone(), l[1].clone())
    })?])
}

pub fn pow(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = legacy_operands(ctx)?;
    let (ta, tb) = (ctx.dtype(a), ctx.dtype(b));
    let body = move |l: &[E]| -> E {
        if ta == tb {
            return expr::binary(BinOp::Pow, l[0].clone(), l[1].clone());
        }
        // Mixed types (Pow-12+): compute in the wider float, then convert to the base type.
        let ct = if ta == DType::F64 || tb == DType::F64 || !ta.is_float() {
            DType::F64
        } else {
            ta
        };
        let r = expr::binary(
            BinOp::Pow,
            expr::cast(l[0].clone(), ct),
            expr::cast(l[1].clone(), ct),
        );
        expr::cast(r, ta)
    };
    Ok(vec![ew(ctx, &[a, b], ta, body)?])
}

pub fn modulo(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let dt = check_same_type(ctx, a, b)?;
    // fmod=0 on floats is Python's modulo (sign of the divisor), as the reference computes it.
    let fmod = ctx.attr_i_or("fmod", 0)?;
    let op = if fmod == 1 {
        BinOp::Rem
    } else {
        BinOp::FloorMod
    };
    Ok(vec![ew(ctx, &[a, b], dt, |l| {
        expr::binary(op, l[0].clone(), l[1].clone())
    })?])
}

/// Variadic elementwise fold (Max, Min, Sum, Mean) with broadcasting (opset 8+).
fn variadic(ctx: &mut Ctx, op: BinOp, mean: bool) -> Result<Vec<ValueId>> {
    let inputs: Vec<ValueId> = (0..ctx.num_inputs())
        .filter_map(|i| ctx.opt_input(i))
        .collect();
    let Some(&first) = inputs.first() else {
        return Err(ctx.err("needs at least one input"));
    };
    let dt = ctx.dtype(first);
    for &v in &inputs {
        if ctx.dtype(v) != dt {
            return Err(ctx.err(format!(
                "all inputs must have type {dt}, got {}",
                ctx.dtype(v)
            )));
        }
    }
    let n = inputs.len();
    // A left fold, as the reference evaluates it, in maps of at most `VARIADIC_CHUNK` operands
    // each continuing the previous one's result: the expressions stay shallow however many
    // inputs the node has (one map over 100,000 inputs overflowed the compiler's stack).
    let mut acc = inputs[0];
    let mut rest = &inputs[1..];
    loop {
        let take = rest.len().min(VARIADIC_CHUNK - 1);
        let (chunk, tail) = rest.split_at(take);
        let operands: Vec<ValueId> = std::iter::once(acc).chain(chunk.iter().copied()).collect();
        let last = tail.is_empty();
        acc = ew(ctx, &operands, dt, |l| {
            let mut e = l[0].clone();
            for x in &l[1..] {
                e = expr::binary(op, e, x.clone());
            }
            if mean && last {
                expr::binary(BinOp::Div, e, expr::konst(dt, Scalar::I(n as i64)))
            } else {
                e
            }
        })?;
        if last {
            return Ok(vec![acc]);
        }
        rest = tail;
    }
}

/// Most operands of one map of a variadic Sum/Mean/Max/Min.
const VARIADIC_CHUNK: usize = 64;

pub fn max(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    variadic(ctx, BinOp::Max, false)
}
pub fn min(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    variadic(ctx, BinOp::Min, false)
}
pub fn sum(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    variadic(ctx, BinOp::Add, false)
}
pub fn mean(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    variadic(ctx, BinOp::Add, true)
}

pub fn not(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    build::expect_types(ctx, x, "input", &[DType::Bool])?;
    Ok(vec![un(ctx, x, DType::Bool, |v| {
        expr::unary(UnOp::Not, v)
    })?])
}

pub fn where_(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (c, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    build::expect_types(ctx, c, "condition", &[DType::Bool])?;
    let dt = check_same_type(ctx, x, y)?;
    Ok(vec![ew(ctx, &[c, x, y], dt, |l| {
        expr::select(l[0].clone(), l[1].clone(), l[2].clone())
    })?])
}

fn cast_target(ctx: &Ctx) -> Result<DType> {
    let a = ctx
        .attr("to")
        .ok_or_else(|| ctx.err("attribute 'to' is required"))?;
    if a.i.is_some() {
        return ctx
            .attr_dtype("to")?
            .ok_or_else(|| ctx.err("attribute 'to' is required"));
    }
    // Cast-1 named the type with a string.
    let s =
        a.s.as_ref()
            .map(|s| String::from_utf8_lossy(s).to_uppercase())
            .unwrap_or_default();
    let last = crate::ir::dtype::LAST_ONNX_CODE;
    let code = (1..=last)
        .find(|&c| DType::onnx_code_name(c) == s)
        .ok_or_else(|| {
            ctx.err(format!(
                "attribute 'to' is '{s}', which is not an ONNX TensorProto data type name \
                 (FLOAT, INT64, …); the model is invalid: set 'to' to a data type"
            ))
        })?;
    DType::from_onnx(code).ok_or_else(|| ctx.unsupported(format!("Cast to '{s}' is not supported")))
}

pub fn cast(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let to = cast_target(ctx)?;
    let saturate = cast_saturate(ctx, to)?;
    Ok(vec![build::cast_with(ctx, x, to, saturate)?])
}

pub fn cast_like(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let (x, like) = (ctx.input(0)?, ctx.input(1)?);
    let to = ctx.dtype(like);
    let saturate = cast_saturate(ctx, to)?;
    Ok(vec![build::cast_with(ctx, x, to, saturate)?])
}

/// BitCast (opset 26): the bits of each element as `to`, a type of the same width.
pub fn bit_cast(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let to = cast_target(ctx)?;
    let from = ctx.dtype(x);
    if from == DType::Str || to == DType::Str {
        return Err(ctx.err("BitCast does not take strings"));
    }
    if from.bits() != to.bits() {
        return Err(ctx.err(format!(
            "BitCast from {from} ({} bits) to {to} ({} bits): the types must have the same width",
            from.bits(),
            to.bits()
        )));
    }
    if from == to {
        return Ok(vec![x]);
    }
    let shape = ctx.shape(x);
    Ok(vec![ctx.add(
        crate::ir::Op::kernel(crate::kernels::BitCast { to }),
        vec![x],
        crate::ir::TypeInfo::new(to, shape),
    )?])
}

/// Cast's and CastLike's `saturate` (opset 19, float8 targets only) and `round_mode`
/// (opset 24, FLOAT8E8M0 targets only: onnxc rounds up, the default).
fn cast_saturate(ctx: &Ctx, to: DType) -> Result<bool> {
    let saturate = ctx.attr_i_or("saturate", 1)? != 0;
    if to == DType::F8E8M0 {
        let mode = ctx.attr_s_or("round_mode", "up")?;
        if mode != "up" {
            return Err(ctx.unsupported(format!(
                "round_mode '{mode}' to FLOAT8E8M0: onnxc rounds up (the default, \
                 round_mode='up'); drop the attribute or round the values before the cast"
            )));
        }
    }
    Ok(saturate)
}

fn float_unary(ctx: &mut Ctx, op: UnOp) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    Ok(vec![un(ctx, x, dt, |v| expr::unary(op, v))?])
}

fn numeric_unary(ctx: &mut Ctx, op: UnOp) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    if dt == DType::Bool {
        return Err(ctx.err("input must be numeric, got bool"));
    }
    Ok(vec![un(ctx, x, dt, |v| expr::unary(op, v))?])
}

pub fn abs(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    numeric_unary(ctx, UnOp::Abs)
}
pub fn neg(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    numeric_unary(ctx, UnOp::Neg)
}
pub fn sign(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    numeric_unary(ctx, UnOp::Sign)
}
pub fn sqrt(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Sqrt)
}
pub fn exp(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Exp)
}
pub fn log(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Log)
}
pub fn sin(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Sin)
}
pub fn cos(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Cos)
}
pub fn tan(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Tan)
}
pub fn asin(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Asin)
}
pub fn acos(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Acos)
}
pub fn atan(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Atan)
}
pub fn sinh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Sinh)
}
pub fn cosh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Cosh)
}
pub fn asinh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Asinh)
}
pub fn acosh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Acosh)
}
pub fn atanh(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Atanh)
}
pub fn erf(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Erf)
}
pub fn floor(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Floor)
}
pub fn ceil(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Ceil)
}
pub fn round(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    float_unary(ctx, UnOp::Round)
}

pub fn reciprocal(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = build::expect_types(ctx, x, "input", FLOATS)?;
    Ok(vec![un(ctx, x, dt, |v| {
        expr::binary(BinOp::Div, expr::f(dt, 1.0), v)
    })?])
}

/// IsNaN and IsInf take every float type, float8 included (opset 20).
fn expect_any_float(ctx: &Ctx, x: ValueId) -> Result<()> {
    let dt = ctx.dtype(x);
    if dt.is_float() {
        Ok(())
    } else {
        Err(ctx.err(format!("input has type {dt}, expected a float type")))
    }
}

pub fn is_nan(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    expect_any_float(ctx, x)?;
    Ok(vec![un(ctx, x, DType::Bool, |v| {
        expr::unary(UnOp::IsNan, v)
    })?])
}

pub fn is_inf(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    expect_any_float(ctx, x)?;
    let pos = ctx.attr_i_or("detect_positive", 1)? != 0;
    let neg = ctx.attr_i_or("detect_negative", 1)? != 0;
    Ok(vec![un(ctx, x, DType::Bool, |v| match (pos, neg) {
        (true, true) => expr::binary(
            BinOp::Or,
            expr::unary(UnOp::IsPosInf, v.clone()),
            expr::unary(UnOp::IsNegInf, v),
        ),
        (true, false) => expr::unary(UnOp::IsPosInf, v),
        (false, true) => expr::unary(UnOp::IsNegInf, v),
        (false, false) => expr::konst(DType::Bool, Scalar::B(false)),
    })?])
}

pub fn clip(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    let dt = ctx.dtype(x);
    let (lo, hi): (Option<E>, Option<E>) = if ctx.opset < 11 {
        let lo = ctx.attr_f("min")?.map(|v| expr::f(dt, v));
        let hi = ctx.attr_f("max")?.map(|v| expr::f(dt, v));
        (
            lo.or(Some(expr::f(dt, f64::from(f32::MIN)))),
            hi.or(Some(expr::f(dt, f64::from(f32::MAX)))),
        )
    } else {
        for i in [1, 2] {
            if let Some(v) = ctx.opt_input(i)
                && ctx.dtype(v) != dt
            {
                return Err(ctx.err(format!(
                    "input {i} ({}) is {} but the input is {dt}; they must have the same type",
                    if i == 1 { "min" } else { "max" },
                    ctx.dtype(v)
                )));
            }
        }
        let scalar_of = |ctx: &Ctx, i: usize| -> Result<Option<E>> {
            match ctx.opt_input(i) {
                None => Ok(None),
                Some(v) => match ctx.konst(v) {
                    Some(t) if t.len() == 1 => Ok(Some(expr::konst(dt, t.get(0)))),
                    Some(_) => Err(ctx.err(format!("input {i} (min/max) must be a scalar"))),
                    None => Ok(None),
                },
            }
        };
        (scalar_of(ctx, 1)?, scalar_of(ctx, 2)?)
    };
    // Run-time bounds are loaded as operands.
    let mut inputs = vec![x];
    let lo_rt = if ctx.opset >= 11 && lo.is_none() {
        ctx.opt_input(1)
    } else {
        None
    };
    let hi_rt = if ctx.opset >= 11 && hi.is_none() {
        ctx.opt_input(2)
    } else {
        None
    };
    let lo_idx = lo_rt.map(|v| {
        inputs.push(v);
        inputs.len() as u32 - 1
    });
    let hi_idx = hi_rt.map(|v| {
        inputs.push(v);
        inputs.len() as u32 - 1
    });
    for &v in &inputs[1..] {
        if ctx.rank(v) != 0 && crate::ir::dim::num_elements(&ctx.shape(v)) != Dim::Known(1) {
            return Err(ctx.err("min and max must be scalars"));
        }
    }
    let rank = ctx.rank(x);
    let shape = ctx.shape(x);
    let scalar_load = |ctx: &Ctx, i: u32| {
        let v = inputs[i as usize];
        expr::load(dt, i, vec![expr::i(0); ctx.rank(v)])
    };
    let mut body = build::load_same(dt, 0, rank);
    if let Some(l) = lo.or_else(|| lo_idx.map(|i| scalar_load(ctx, i))) {
        body = expr::binary(BinOp::Max, body, l);
    }
    if let Some(h) = hi.or_else(|| hi_idx.map(|i| scalar_load(ctx, i))) {
        body = expr::binary(BinOp::Min, body, h);
    }
    Ok(vec![ctx.map(dt, shape, inputs, body)?])
}

pub fn identity(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    Ok(vec![ctx.input(0)?])
}

/// Inference-mode dropout: identity, with an all-true mask.
pub fn dropout(ctx: &mut Ctx) -> Result<Vec<ValueId>> {
    let x = ctx.input(0)?;
    if let Some(r) = ctx.opt_input(1).filter(|_| ctx.opset >= 12) {
        build::expect_types(ctx, r, "input ratio", FLOATS)?;
    }
    if ctx.opset >= 12
        && let Some(t) = ctx.opt_input(2)
    {
        build::expect_types(ctx, t, "input training_mode", &[DType::Bool])?;
        let inference = matches!(ctx.konst(t), Some(c) if c.len() == 1 && !c.get(0).as_bool());
        if !inference {
            // Training mode, or a run-time flag: random dropout (`random::dropout_training`).
            let ratio = match ctx.opt_input(1) {
                Some(r) => r,
                None => build::scalar(ctx, ctx.dtype(x), 0.5),
            };
            let training = if ctx.konst(t).is_some() {
                None
            } else {
                Some(t)
            };
            let (y, mask) =
                crate::frontend::ops::random::dropout_training(ctx, x, ratio, training)?;
            return Ok(vec![y, mask]);
        }
    }
    if ctx.opset < 7 && ctx.attr_i_or("is_test", 0)? == 0 {
        // Old Dropout defaulted to training mode; inference compilers treat it as identity.
    }
    let shape = ctx.shape(x);
    let mask = ctx.map(
        DType::Bool,
        shape,
        vec![],
        expr::konst(DType::Bool, Scalar::B(true)),
    )?;
    Ok(vec![x, mask])
}
