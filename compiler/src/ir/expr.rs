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
    Arc::new(Expr {
        dtype: to,
        kind: ExprKind::Cast(a),
    })
}

/// Rounds a value computed in f32 to its narrow storage type (f16/bf16), as materializing it
/// would; identity for other types. Used where fusion removes a store/load pair.
pub fn round_to_storage(e: E) -> E {
    match e.dtype {
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

/// A compact textual form for dumps: `add(load0[v0, v1], 1.0)`.
pub fn display(e: &E) -> String {
    match &e.kind {
        ExprKind::Var(v) => format!("v{v}"),
        ExprKind::Const(c) => format!("{c}"),
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
