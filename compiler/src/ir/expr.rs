//! Scalar expressions over index variables: the body language of `Map` and `Reduce` ops.
//!
//! A `Map` node computes `out[v0, …, vr-1] = body`, a `Reduce` node folds `body` over extra
//! reduction variables `vr, vr+1, …`. `Load { input, index }` reads element `index` (one i64
//! expression per dimension) of the node's `input`-th operand.
//!
//! **Invariant:** every `Load` index is in bounds for every value of the variables in their
//! ranges. Builders guarantee it for affine indexing; data-dependent indices go through
//! `CheckIndex`, which maps an out-of-range index to 0 and makes the run return an error.

use super::dtype::DType;
use super::tensor::Scalar;
use std::collections::HashMap;
use std::sync::Arc;

pub type E = Arc<Expr>;

#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Expr {
    pub dtype: DType,
    pub kind: ExprKind,
}

#[derive(Debug, PartialEq, Eq, Hash)]
pub enum ExprKind {
    /// An index variable (always `I64`).
    Var(u32),
    Const(Scalar),
    Load {
        input: u32,
        index: Vec<E>,
    },
    Unary(UnOp, E),
    Binary(BinOp, E, E),
    /// `cond ? a : b`; both sides are always safe to evaluate.
    Select(E, E, E),
    /// Conversion to `self.dtype` with ONNX `Cast` semantics.
    Cast(E),
    /// An i64 index checked against `[-bound, bound)`; negatives wrap by `+bound`.
    /// Out-of-range values make the run fail with `ONNXC_ERR_INDEX` and yield 0.
    CheckIndex {
        index: E,
        bound: i64,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Log,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Erf,
    Sigmoid,
    Floor,
    Ceil,
    /// Round half to even.
    Round,
    Trunc,
    Sign,
    /// Logical not (bool).
    Not,
    /// Bitwise not (integers).
    BitNot,
    IsNan,
    IsPosInf,
    IsNegInf,
}

impl UnOp {
    /// One or two instructions whatever the type (a sign flip, a mask, a rounding, a
    /// compare), against a libm-style sequence or a square root for the others. The fuser
    /// recomputes maps made of cheap ops where they are read; codegen does not hoist them
    /// out of vector loops.
    pub fn is_cheap(self) -> bool {
        matches!(
            self,
            UnOp::Neg
                | UnOp::Abs
                | UnOp::Not
                | UnOp::BitNot
                | UnOp::Floor
                | UnOp::Ceil
                | UnOp::Trunc
                | UnOp::Round
                | UnOp::Sign
                | UnOp::IsNan
                | UnOp::IsPosInf
                | UnOp::IsNegInf
        )
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Float division; integer division truncating toward zero (0 divisor yields 0).
    Div,
    /// Remainder with the sign of the dividend (C `fmod`).
    Rem,
    /// Remainder with the sign of the divisor (Python `%`).
    FloorMod,
    Pow,
    /// NaN-propagating maximum.
    Max,
    Min,
    And,
    Or,
    Xor,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

pub fn var(i: u32) -> E {
    Arc::new(Expr {
        dtype: DType::I64,
        kind: ExprKind::Var(i),
    })
}

pub fn konst(dtype: DType, v: Scalar) -> E {
    Arc::new(Expr {
        dtype,
        kind: ExprKind::Const(v.cast(dtype)),
    })
}

pub fn f(dtype: DType, v: f64) -> E {
    konst(dtype, Scalar::F(v))
}

pub fn i(v: i64) -> E {
    konst(DType::I64, Scalar::I(v))
}

pub fn load(dtype: DType, input: u32, index: Vec<E>) -> E {
    Arc::new(Expr {
        dtype,
        kind: ExprKind::Load { input, index },
    })
}

pub fn unary(op: UnOp, a: E) -> E {
    let dtype = match op {
        UnOp::IsNan | UnOp::IsPosInf | UnOp::IsNegInf => DType::Bool,
        _ => a.dtype,
    };
    if let ExprKind::Const(c) = a.kind
        && let Some(v) = super::eval::eval_unary(op, a.dtype, c)
    {
        return konst(dtype, v);
    }
    Arc::new(Expr {
        dtype,
        kind: ExprKind::Unary(op, a),
    })
}

pub fn binary(op: BinOp, a: E, b: E) -> E {
    debug_assert_eq!(a.dtype, b.dtype, "binary {op:?} operands differ in type");
    let dtype = if op.is_comparison() {
        DType::Bool
    } else {
        a.dtype
    };
    if let (ExprKind::Const(x), ExprKind::Const(y)) = (&a.kind, &b.kind) {
        return konst(dtype, super::eval::eval_binary(op, a.dtype, *x, *y));
    }
    // Identities that hold for every type and every value (including NaN for floats).
    let is =
        |e: &E, v: i64| matches!(e.kind, ExprKind::Const(c) if c == Scalar::I(v).cast(e.dtype));
    match op {
        BinOp::Add if is(&b, 0) && !a.dtype.is_float() => return a,
        BinOp::Add if is(&a, 0) && !a.dtype.is_float() => return b,
        BinOp::Sub if is(&b, 0) && !a.dtype.is_float() => return a,
        BinOp::Mul if is(&b, 1) => return a,
        BinOp::Mul if is(&a, 1) => return b,
        BinOp::Div if is(&b, 1) => return a,
        _ => {}
    }
    Arc::new(Expr {
        dtype,
        kind: ExprKind::Binary(op, a, b),
    })
}

pub fn select(c: E, a: E, b: E) -> E {
    if let ExprKind::Const(v) = c.kind {
        return if v.as_bool() { a } else { b };
    }
    if a == b {
        return a;
    }
    Arc::new(Expr {
        dtype: a.dtype,
        kind: ExprKind::Select(c, a, b),
    })
}

pub fn cast(a: E, to: DType) -> E {
    if a.dtype == to {
        return a;
    }
    if let ExprKind::Const(c) = a.kind {
        return konst(to, super::eval::cast_scalar(c, a.dtype, to));
    }
    if let Some(e) = int_round_trip(&a, to) {
        return e;
    }
    Arc::new(Expr {
        dtype: to,
        kind: ExprKind::Cast(a),
    })
}

/// `cast<to>(a)` where `a = cast<int>(x)` of a float `x` that a clamp keeps inside the
/// integer type's range, every integer of which `to` (float32 or float64) holds exactly — a
/// quantized value read back (QuantizeLinear fused into DequantizeLinear or a quantized
/// product's centering): the same number computed in the float domain, `x`'s integer part
/// (`x` itself where it is integral) or 0 for NaN, as the integer cast gives. Float-only
/// expressions stay vectorizable; the integer round trip made such maps scalar (5 ns per
/// element). None when the rule does not apply.
fn int_round_trip(a: &E, to: DType) -> Option<E> {
    let exact = match to {
        DType::F32 => (1i64 << 24) as f64,
        DType::F64 => (1i64 << 53) as f64,
        _ => return None,
    };
    let ExprKind::Cast(x) = &a.kind else {
        return None;
    };
    if !matches!(x.dtype, DType::F32 | DType::F64) {
        return None;
    }
    let (lo, hi) = int_type_range(a.dtype)?;
    if lo < -exact || hi > exact {
        return None;
    }
    let (xlo, xhi) = float_bounds(x);
    if xlo < lo || xhi > hi {
        return None;
    }
    let whole = if is_integral(x) {
        x.clone()
    } else {
        unary(UnOp::Trunc, x.clone())
    };
    Some(select(
        binary(BinOp::Eq, x.clone(), x.clone()),
        cast(whole, to),
        f(to, 0.0),
    ))
}

/// The values of an integer type up to 32 bits (None for others).
pub fn int_type_range(dt: DType) -> Option<(f64, f64)> {
    Some(match dt {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        DType::U16 => (0.0, 65535.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::U32 => (0.0, u32::MAX as f64),
        _ => return None,
    })
}

/// Bounds of a float expression's non-NaN values from its clamps and integer casts
/// (`(-inf, inf)` where unknown).
pub fn float_bounds(e: &E) -> (f64, f64) {
    match &e.kind {
        ExprKind::Const(c) if !c.as_f64().is_nan() => (c.as_f64(), c.as_f64()),
        ExprKind::Binary(BinOp::Max, a, b) => {
            let (al, ah) = float_bounds(a);
            let (bl, bh) = float_bounds(b);
            (al.max(bl), ah.max(bh))
        }
        ExprKind::Binary(BinOp::Min, a, b) => {
            let (al, ah) = float_bounds(a);
            let (bl, bh) = float_bounds(b);
            (al.min(bl), ah.min(bh))
        }
        ExprKind::Cast(x) if !x.dtype.is_float() => {
            int_type_range(x.dtype).unwrap_or((f64::NEG_INFINITY, f64::INFINITY))
        }
        ExprKind::Select(_, a, b) => {
            let (al, ah) = float_bounds(a);
            let (bl, bh) = float_bounds(b);
            (al.min(bl), ah.max(bh))
        }
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    }
}

/// Whether every non-NaN value of a float expression is an integer (or infinite).
pub fn is_integral(e: &E) -> bool {
    match &e.kind {
        ExprKind::Const(c) => c.as_f64().fract() == 0.0 || c.as_f64().is_infinite(),
        ExprKind::Unary(UnOp::Round | UnOp::Floor | UnOp::Ceil | UnOp::Trunc, _) => true,
        ExprKind::Unary(UnOp::Neg | UnOp::Abs, a) => is_integral(a),
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Max | BinOp::Min, a, b) => {
            is_integral(a) && is_integral(b)
        }
        ExprKind::Select(_, a, b) => is_integral(a) && is_integral(b),
        ExprKind::Cast(x) => !x.dtype.is_float() || is_integral(x),
        _ => false,
    }
}

/// Rounds a value computed in f32 to its narrow storage type (f16/bf16, float8/float4), as
/// materializing it would; identity for other types. Used where fusion removes a store/load
/// pair.
pub fn round_to_storage(e: E) -> E {
    match e.dtype {
        dt if dt.is_lowp_float() => cast(cast(e, DType::F32), dt),
        DType::F16 | DType::BF16 => {
            let dt = e.dtype;
            cast(cast(e, DType::F32), dt)
        }
        _ => e,
    }
}

pub fn check_index(index: E, bound: i64) -> E {
    Arc::new(Expr {
        dtype: DType::I64,
        kind: ExprKind::CheckIndex { index, bound },
    })
}

// Index arithmetic on i64 expressions.
pub fn add(a: E, b: E) -> E {
    binary(BinOp::Add, a, b)
}
pub fn sub(a: E, b: E) -> E {
    binary(BinOp::Sub, a, b)
}
pub fn mul(a: E, b: E) -> E {
    binary(BinOp::Mul, a, b)
}
pub fn min(a: E, b: E) -> E {
    binary(BinOp::Min, a, b)
}
pub fn max(a: E, b: E) -> E {
    binary(BinOp::Max, a, b)
}
pub fn lt(a: E, b: E) -> E {
    binary(BinOp::Lt, a, b)
}
pub fn ge(a: E, b: E) -> E {
    binary(BinOp::Ge, a, b)
}
pub fn and(a: E, b: E) -> E {
    binary(BinOp::And, a, b)
}
/// Floor division of i64 index expressions (divisor positive).
pub fn idiv(a: E, b: i64) -> E {
    if b == 1 {
        return a;
    }
    // For index math the dividend is non-negative, so truncation equals floor.
    binary(BinOp::Div, a, i(b))
}
pub fn imod(a: E, b: i64) -> E {
    binary(BinOp::FloorMod, a, i(b))
}
pub fn clamp(a: E, lo: i64, hi: i64) -> E {
    max(min(a, i(hi)), i(lo))
}

impl Expr {
    pub fn as_const(&self) -> Option<Scalar> {
        match self.kind {
            ExprKind::Const(c) => Some(c),
            _ => None,
        }
    }

    /// Calls `f` on each direct child.
    pub fn children(&self) -> Vec<&E> {
        match &self.kind {
            ExprKind::Var(_) | ExprKind::Const(_) => vec![],
            ExprKind::Load { index, .. } => index.iter().collect(),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => vec![a],
            ExprKind::CheckIndex { index, .. } => vec![index],
            ExprKind::Binary(_, a, b) => vec![a, b],
            ExprKind::Select(c, a, b) => vec![c, a, b],
        }
    }

    /// Max variable index used + 1.
    pub fn num_vars(&self) -> u32 {
        match self.kind {
            ExprKind::Var(v) => v + 1,
            _ => self
                .children()
                .iter()
                .map(|c| c.num_vars())
                .max()
                .unwrap_or(0),
        }
    }
}

/// Rebuilds `e` bottom-up, replacing nodes for which `f` returns `Some`. Shared subtrees are
/// rewritten once (memoized by address), so DAG sharing is preserved.
pub fn rewrite(e: &E, f: &mut dyn FnMut(&E) -> Option<E>) -> E {
    fn go(e: &E, f: &mut dyn FnMut(&E) -> Option<E>, memo: &mut HashMap<*const Expr, E>) -> E {
        let key = Arc::as_ptr(e);
        if let Some(r) = memo.get(&key) {
            return r.clone();
        }
        let r = if let Some(r) = f(e) {
            r
        } else {
            match &e.kind {
                ExprKind::Var(_) | ExprKind::Const(_) => e.clone(),
                ExprKind::Load { input, index } => {
                    let index: Vec<E> = index.iter().map(|x| go(x, f, memo)).collect();
                    load(e.dtype, *input, index)
                }
                ExprKind::Unary(op, a) => unary(*op, go(a, f, memo)),
                ExprKind::Binary(op, a, b) => {
                    let a = go(a, f, memo);
                    let b = go(b, f, memo);
                    binary(*op, a, b)
                }
                ExprKind::Select(c, a, b) => {
                    let c = go(c, f, memo);
                    let a = go(a, f, memo);
                    let b = go(b, f, memo);
                    select(c, a, b)
                }
                ExprKind::Cast(a) => cast(go(a, f, memo), e.dtype),
                ExprKind::CheckIndex { index, bound } => check_index(go(index, f, memo), *bound),
            }
        };
        memo.insert(key, r.clone());
        r
    }
    go(e, f, &mut HashMap::new())
}

/// Hash-conses `e`: structurally equal subexpressions become one shared node, so that code
/// generation, which computes each node once, computes each value once. Fusion leaves such
/// copies: a map inlined into several reads of a map that is itself inlined somewhere (a
/// QDQ-quantized SiLU read its requantized input five times, each recomputed with its
/// divisions and roundings).
pub fn share(e: &E) -> E {
    #[derive(PartialEq, Eq, Hash)]
    enum Key {
        Var(u32),
        Const(DType, u8, u64),
        Load(DType, u32, Vec<usize>),
        Unary(DType, UnOp, usize),
        Binary(DType, BinOp, usize, usize),
        Select(usize, usize, usize),
        Cast(DType, usize),
        Check(usize, i64),
    }
    fn go(e: &E, memo: &mut HashMap<*const Expr, E>, table: &mut HashMap<Key, E>) -> E {
        if let Some(r) = memo.get(&Arc::as_ptr(e)) {
            return r.clone();
        }
        let id = |x: &E| Arc::as_ptr(x) as usize;
        let (key, kind) = match &e.kind {
            ExprKind::Var(v) => (Key::Var(*v), ExprKind::Var(*v)),
            ExprKind::Const(c) => {
                let (tag, bits) = match *c {
                    Scalar::F(v) => (0, v.to_bits()),
                    Scalar::I(v) => (1, v as u64),
                    Scalar::U(v) => (2, v),
                    Scalar::B(v) => (3, v as u64),
                };
                (Key::Const(e.dtype, tag, bits), ExprKind::Const(*c))
            }
            ExprKind::Load { input, index } => {
                let index: Vec<E> = index.iter().map(|x| go(x, memo, table)).collect();
                (
                    Key::Load(e.dtype, *input, index.iter().map(id).collect()),
                    ExprKind::Load {
                        input: *input,
                        index,
                    },
                )
            }
            ExprKind::Unary(op, a) => {
                let a = go(a, memo, table);
                (Key::Unary(e.dtype, *op, id(&a)), ExprKind::Unary(*op, a))
            }
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (go(a, memo, table), go(b, memo, table));
                (
                    Key::Binary(e.dtype, *op, id(&a), id(&b)),
                    ExprKind::Binary(*op, a, b),
                )
            }
            ExprKind::Select(c, a, b) => {
                let (c, a, b) = (go(c, memo, table), go(a, memo, table), go(b, memo, table));
                (
                    Key::Select(id(&c), id(&a), id(&b)),
                    ExprKind::Select(c, a, b),
                )
            }
            ExprKind::Cast(a) => {
                let a = go(a, memo, table);
                (Key::Cast(e.dtype, id(&a)), ExprKind::Cast(a))
            }
            ExprKind::CheckIndex { index, bound } => {
                let index = go(index, memo, table);
                (
                    Key::Check(id(&index), *bound),
                    ExprKind::CheckIndex {
                        index,
                        bound: *bound,
                    },
                )
            }
        };
        let r = table
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Expr {
                    dtype: e.dtype,
                    kind,
                })
            })
            .clone();
        memo.insert(Arc::as_ptr(e), r.clone());
        r
    }
    go(e, &mut HashMap::new(), &mut HashMap::new())
}

/// Substitutes variables: `Var(k)` becomes `vars[k]`.
pub fn substitute_vars(e: &E, vars: &[E]) -> E {
    rewrite(e, &mut |x| match x.kind {
        ExprKind::Var(k) => Some(vars[k as usize].clone()),
        _ => None,
    })
}

/// Renumbers load operands: `Load { input: k }` becomes `Load { input: map[k] }`.
pub fn remap_inputs(e: &E, map: &[u32]) -> E {
    rewrite(e, &mut |x| match &x.kind {
        ExprKind::Load { input, index } => {
            let index: Vec<E> = index.iter().map(|i| remap_inputs(i, map)).collect();
            Some(load(x.dtype, map[*input as usize], index))
        }
        _ => None,
    })
}

/// Which operand indices the expression loads from.
pub fn used_inputs(e: &E, out: &mut Vec<u32>) {
    let mut seen = std::collections::HashSet::new();
    fn go(e: &E, out: &mut Vec<u32>, seen: &mut std::collections::HashSet<*const Expr>) {
        if !seen.insert(Arc::as_ptr(e)) {
            return;
        }
        if let ExprKind::Load { input, .. } = e.kind
            && !out.contains(&input)
        {
            out.push(input);
        }
        for c in e.children() {
            go(c, out, seen);
        }
    }
    go(e, out, &mut seen)
}

/// A type disagreement found by [`check_types`].
#[derive(Debug, PartialEq)]
pub enum TypeError {
    /// Operand `input` holds `found` elements where the expression reads `wanted` ones.
    Load {
        input: u32,
        found: DType,
        wanted: DType,
    },
    /// Values of two types meet in one operation (binary operands, select arms).
    Mixed(DType, DType),
    /// Strings are computed on (arithmetic, comparison, conversion): the generated code
    /// only moves them.
    Str,
    Other(String),
}

/// Checks that types agree throughout `e` — binary operands, select arms, loads of the
/// operands' element types (`inputs`), i64 indices — as codegen assumes. A mismatch is a
/// builder that did not validate its operands' types; codegen would crash on it.
pub fn check_types(e: &E, inputs: &[DType]) -> Result<(), TypeError> {
    fn go(
        e: &E,
        inputs: &[DType],
        seen: &mut std::collections::HashSet<*const Expr>,
    ) -> Result<(), TypeError> {
        if !seen.insert(Arc::as_ptr(e)) {
            return Ok(());
        }
        let want = |c: &E, t: DType| {
            if c.dtype == t {
                Ok(())
            } else {
                Err(TypeError::Other(format!(
                    "{} is {}, expected {t}",
                    display(c),
                    c.dtype
                )))
            }
        };
        let is_str = |x: &E| x.dtype == DType::Str;
        match &e.kind {
            ExprKind::Unary(_, a) | ExprKind::Cast(a) if is_str(a) || is_str(e) => {
                return Err(TypeError::Str);
            }
            ExprKind::Binary(_, a, _) if is_str(a) => return Err(TypeError::Str),
            ExprKind::Const(_) if is_str(e) => return Err(TypeError::Str),
            _ => {}
        }
        match &e.kind {
            ExprKind::Var(_) => want(e, DType::I64)?,
            ExprKind::Const(_) => {}
            ExprKind::Load { input, index } => {
                match inputs.get(*input as usize) {
                    Some(&t) if t == e.dtype => {}
                    Some(&t) => {
                        return Err(TypeError::Load {
                            input: *input,
                            found: t,
                            wanted: e.dtype,
                        });
                    }
                    None => {
                        return Err(TypeError::Other(format!(
                            "{} reads a missing operand",
                            display(e)
                        )));
                    }
                }
                for i in index {
                    want(i, DType::I64)?;
                }
            }
            ExprKind::Unary(op, a) => match op {
                UnOp::IsNan | UnOp::IsPosInf | UnOp::IsNegInf => want(e, DType::Bool)?,
                _ => want(a, e.dtype)?,
            },
            ExprKind::Binary(op, a, b) => {
                if a.dtype != b.dtype {
                    return Err(TypeError::Mixed(a.dtype, b.dtype));
                }
                want(
                    e,
                    if op.is_comparison() {
                        DType::Bool
                    } else {
                        a.dtype
                    },
                )?;
            }
            ExprKind::Select(c, a, b) => {
                want(c, DType::Bool)?;
                if a.dtype != b.dtype {
                    return Err(TypeError::Mixed(a.dtype, b.dtype));
                }
                want(a, e.dtype)?;
            }
            ExprKind::Cast(_) => {}
            ExprKind::CheckIndex { index, .. } => want(index, DType::I64)?,
        }
        for c in e.children() {
            go(c, inputs, seen)?;
        }
        Ok(())
    }
    go(e, inputs, &mut std::collections::HashSet::new())
}

/// Whether evaluating `e` can make the run fail (it holds a `CheckIndex`).
pub fn can_fail(e: &E) -> bool {
    fn go(e: &E, seen: &mut std::collections::HashSet<*const Expr>) -> bool {
        if !seen.insert(Arc::as_ptr(e)) {
            return false;
        }
        matches!(e.kind, ExprKind::CheckIndex { .. })
            || e.children().into_iter().any(|c| go(c, seen))
    }
    go(e, &mut std::collections::HashSet::new())
}

/// Whether `e` mentions loop variable `var` (memoized over the DAG).
pub fn depends_on(e: &E, var: u32) -> bool {
    fn go(e: &E, var: u32, memo: &mut HashMap<*const Expr, bool>) -> bool {
        if let Some(&d) = memo.get(&Arc::as_ptr(e)) {
            return d;
        }
        let d = match &e.kind {
            ExprKind::Var(v) => *v == var,
            _ => e.children().iter().any(|c| go(c, var, memo)),
        };
        memo.insert(Arc::as_ptr(e), d);
        d
    }
    go(e, var, &mut HashMap::new())
}

/// `Some(c)` if `e` is `c·var + (terms free of var)`; `None` if it depends on `var` otherwise.
pub fn linear_coeff(e: &E, var: u32) -> Option<i64> {
    if !depends_on(e, var) {
        return Some(0);
    }
    match &e.kind {
        ExprKind::Var(_) => Some(1),
        ExprKind::Binary(BinOp::Add, a, b) => Some(linear_coeff(a, var)? + linear_coeff(b, var)?),
        ExprKind::Binary(BinOp::Sub, a, b) => Some(linear_coeff(a, var)? - linear_coeff(b, var)?),
        ExprKind::Binary(BinOp::Mul, a, b) => match (a.as_const(), b.as_const()) {
            (Some(c), _) => Some(c.as_i64() * linear_coeff(b, var)?),
            (_, Some(c)) => Some(c.as_i64() * linear_coeff(a, var)?),
            _ => None,
        },
        _ => None,
    }
}

/// `linear_coeff` with a coefficient that may be an expression free of `var` (a stride a
/// dim taken at run time sizes, `mul(v4, mul(16, dim))`): `Some(c)` if `e` is `c·var +
/// (terms free of var)`.
pub fn linear_coeff_expr(e: &E, var: u32) -> Option<E> {
    if !depends_on(e, var) {
        return Some(i(0));
    }
    match &e.kind {
        ExprKind::Var(_) => Some(i(1)),
        ExprKind::Binary(BinOp::Add, a, b) => {
            Some(add(linear_coeff_expr(a, var)?, linear_coeff_expr(b, var)?))
        }
        ExprKind::Binary(BinOp::Sub, a, b) => {
            Some(sub(linear_coeff_expr(a, var)?, linear_coeff_expr(b, var)?))
        }
        ExprKind::Binary(BinOp::Mul, a, b) if !depends_on(a, var) => {
            Some(mul(a.clone(), linear_coeff_expr(b, var)?))
        }
        ExprKind::Binary(BinOp::Mul, a, b) if !depends_on(b, var) => {
            Some(mul(linear_coeff_expr(a, var)?, b.clone()))
        }
        _ => None,
    }
}

/// Counts nodes in the DAG (shared nodes once): a size measure for fusion heuristics.
pub fn dag_size(e: &E) -> usize {
    let mut seen = std::collections::HashSet::new();
    fn go(e: &E, seen: &mut std::collections::HashSet<*const Expr>) {
        if seen.insert(Arc::as_ptr(e)) {
            for c in e.children() {
                go(c, seen);
            }
        }
    }
    go(e, &mut seen);
    seen.len()
}

/// A compact textual form for dumps: `add(in0[v0, v1], 1.0)`; a reduction epilogue's read of
/// the reduced value (input `u32::MAX`, `schedule::EPILOGUE_ACC`) is `acc`.
pub fn display(e: &E) -> String {
    match &e.kind {
        ExprKind::Var(v) => format!("v{v}"),
        ExprKind::Const(c) => format!("{c}"),
        ExprKind::Load {
            input: u32::MAX,
            index,
        } if index.is_empty() => "acc".to_string(),
        ExprKind::Load { input, index } => {
            let ix: Vec<String> = index.iter().map(display).collect();
            format!("in{input}[{}]", ix.join(", "))
        }
        ExprKind::Unary(op, a) => format!("{}({})", format!("{op:?}").to_lowercase(), display(a)),
        ExprKind::Binary(op, a, b) => format!(
            "{}({}, {})",
            format!("{op:?}").to_lowercase(),
            display(a),
            display(b)
        ),
        ExprKind::Select(c, a, b) => {
            format!("select({}, {}, {})", display(c), display(a), display(b))
        }
        ExprKind::Cast(a) => format!("cast<{}>({})", e.dtype, display(a)),
        ExprKind::CheckIndex { index, bound } => format!("check({}, {bound})", display(index)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::eval::eval_binary;
    use crate::ir::interp::eval_map;
    use crate::ir::tensor::Tensor;

    /// `cast<float>(cast<int>(clamp(x)))` simplifies to float-only arithmetic that gives
    /// exactly what the integer round trip gives, NaN and infinities included.
    #[test]
    fn int_round_trip_matches_the_integer_casts() {
        let xs: Vec<f64> = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.5,
            2.5,
            -2.5,
            254.5,
            255.0,
            255.7,
            -128.5,
            127.49,
            1e30,
            -1e30,
            3.4e38,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            65535.5,
            -32768.9,
            7.0,
        ]
        .iter()
        .map(|&v| v as f32 as f64)
        .collect();
        let input = Tensor::from_scalars(
            DType::F32,
            vec![xs.len() as i64],
            &xs.iter().map(|&v| Scalar::F(v)).collect::<Vec<_>>(),
        );
        for int in [DType::U8, DType::I8, DType::U16, DType::I16] {
            let (lo, hi) = int_type_range(int).unwrap();
            for rounded in [false, true] {
                for to in [DType::F32, DType::F64] {
                    let x = load(DType::F32, 0, vec![var(0)]);
                    let x = if rounded { unary(UnOp::Round, x) } else { x };
                    let clamped = binary(
                        BinOp::Max,
                        binary(BinOp::Min, x, f(DType::F32, hi)),
                        f(DType::F32, lo),
                    );
                    let e = cast(cast(clamped, int), to);
                    assert!(
                        !matches!(&e.kind, ExprKind::Cast(a) if !a.dtype.is_float()),
                        "{int} -> {to}: not simplified: {}",
                        display(&e)
                    );
                    let got = eval_map(&e, &[&input], to, &[xs.len() as i64]).unwrap();
                    for (k, &v) in xs.iter().enumerate() {
                        let v = if rounded {
                            crate::ir::eval::eval_unary(UnOp::Round, DType::F32, Scalar::F(v))
                                .unwrap()
                        } else {
                            Scalar::F(v)
                        };
                        let c = eval_binary(
                            BinOp::Max,
                            DType::F32,
                            eval_binary(BinOp::Min, DType::F32, v, Scalar::F(hi)),
                            Scalar::F(lo),
                        );
                        let want = c.cast(int).cast(to).as_f64();
                        let g = got.get(k).as_f64();
                        assert!(
                            g.to_bits() == want.to_bits() || (g == 0.0 && want == 0.0),
                            "{int} -> {to}, rounded {rounded}, x = {}: got {g}, want {want}",
                            xs[k]
                        );
                    }
                }
            }
        }
    }

    /// Without a clamp into the integer range the round trip is kept (it wraps).
    #[test]
    fn int_round_trip_needs_a_clamp() {
        let x = load(DType::F32, 0, vec![var(0)]);
        let e = cast(cast(x, DType::U8), DType::F32);
        assert!(matches!(&e.kind, ExprKind::Cast(a) if a.dtype == DType::U8));
    }

    /// `share` makes structurally equal subtrees one node.
    #[test]
    fn share_merges_equal_subtrees() {
        let a = || unary(UnOp::Exp, load(DType::F32, 0, vec![var(0)]));
        let e = share(&binary(BinOp::Add, a(), a()));
        let ExprKind::Binary(_, l, r) = &e.kind else {
            panic!("{}", display(&e))
        };
        assert!(Arc::ptr_eq(l, r));
    }
}
