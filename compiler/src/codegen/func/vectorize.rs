//! Vector forms: which innermost loops run four float32 lanes at a time, and how each of
//! their expression nodes is computed. The one definition both the decision and the code
//! come from.
//!
//! `vector_loop` (a loop body) and `vector_reduction` (a reduction's body along its
//! innermost reduced loop) either return a plan or `None` (the loop runs scalar). A plan
//! (`VPlan`) gives every expression node the emitter will compute its vector form (`VForm`):
//! uniform across the lanes (scalar code), the epilogue's vector accumulator, a contiguous or
//! strided load, a gather at a computed float index, four bytes widened, or an operation with
//! an f32x4 instruction or `vmath` polynomial, whose operands are nodes planned before it.
//! `vector.rs` translates the forms as they are, with no check of its own: a node this file
//! cannot give a form makes the whole loop scalar, so the two cannot disagree.
//!
//! Contract: planning is pure (no CLIF is emitted) and depends only on the loop IR and the
//! buffers' element types; nodes come in post-order (operands first), one per expression
//! node, shared subexpressions once.

use super::scalar::clamp_const;
use crate::ir::DType;
use crate::ir::expr::{BinOp, E, Expr, ExprKind, UnOp, linear_coeff, linear_coeff_expr};
use crate::ir::graph::ReduceKind;
use crate::loops::{BufId, Buffer, Stmt};
use crate::schedule::EPILOGUE_ACC;
use cranelift_codegen::ir::condcodes::FloatCC;
use std::collections::HashMap;
use std::sync::Arc;

/// A node of a `VPlan`, by position.
pub(super) type VIx = usize;

/// How the vector loop computes one expression node.
pub(super) enum VForm<'e> {
    /// The same in every lane (it does not vary along the loop and reads no accumulator):
    /// computed by scalar code, splat where combined with lanes.
    Uniform,
    /// The vector accumulator of four adjacent reductions (their epilogue reads it).
    Acc,
    /// A float32 load at an index `stride·var + …`: one vector load when `stride` is 1,
    /// four scalar loads otherwise.
    Load {
        buf: BufId,
        index: &'e E,
        stride: Stride,
    },
    /// A float32 load at `base + cast<int64>(f)` (a table read, `schedule::lut`; `base`, the
    /// row of a per-channel table, does not vary along the loop): `f` per lane, one vector
    /// conversion, four scalar loads.
    Gather {
        buf: BufId,
        base: Option<&'e E>,
        at: VIx,
    },
    /// `cast<float32>` of a uint8/int8 load contiguous along the loop (a quantized tensor):
    /// one 4-byte load widened to four float32 lanes.
    Bytes {
        buf: BufId,
        signed: bool,
        index: &'e E,
    },
    /// `cast<float32>` of an int32 load contiguous along the loop (an integer product's
    /// sums), plus an int32 value that does not vary along it where given (the int32 bias
    /// onnxruntime's dynamically quantized convolutions add before the cast): one 16-byte
    /// load, a wrapping add of the splatted value, converted to four float32 lanes.
    Words {
        buf: BufId,
        index: &'e E,
        plus: Option<VIx>,
    },
    /// A bool load contiguous along the loop (a mask a select reads: a causal mask's
    /// Trilu cast to bool): one 4-byte load widened to a lane mask.
    Bools {
        buf: BufId,
        index: &'e E,
    },
    Unary(VUnary, VIx),
    /// `x^y` for a constant `y` (`vmath::pow_const`).
    PowConst(VIx, f32),
    /// `x · c`: a division by a power of two as the product by its reciprocal, which
    /// rounds the same real number (a multiply instead of a divide).
    Scale(VIx, f32),
    /// `max`/`min` against a non-NaN constant: one maxps/minps (`clamp_insts`).
    Clamp(BinOp, VIx, f64),
    Arith(VArith, VIx, VIx),
    /// A float32 comparison: a lane mask.
    Compare(FloatCC, VIx, VIx),
    /// `and`/`or` of lane masks or scalar bools.
    Logic(VLogic, VIx, VIx),
    /// Per-lane choice by a lane mask, or by a scalar bool.
    Select(VIx, VIx, VIx),
}

/// How far apart a strided load's lanes are, in elements.
pub(super) enum Stride {
    /// A constant (1: contiguous).
    Fixed(i64),
    /// An expression that does not vary along the loop (a stride a dim taken at run time
    /// sizes: a transposed read of a `[C, H·W]` map), computed by scalar code.
    Run(E),
}

/// Float32 unary operations with a vector form.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum VUnary {
    Neg,
    Abs,
    Sqrt,
    Floor,
    Ceil,
    Round,
    Trunc,
    Exp,
    Log,
    Tanh,
    Erf,
    Sigmoid,
}

/// Float32 binary arithmetic with an f32x4 instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum VArith {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum VLogic {
    And,
    Or,
}

/// The fold of a vectorized reduction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum VFold {
    Sum,
    Max,
    Min,
}

pub(super) struct VNode<'e> {
    pub expr: &'e E,
    pub form: VForm<'e>,
}

/// The vector forms of an expression's nodes, operands first; the expression is the last.
pub(super) struct VPlan<'e> {
    pub nodes: Vec<VNode<'e>>,
    pub root: VIx,
}

/// An epilogue's plan: the only kind that reads the accumulator (`VForm::Acc`).
pub(super) struct EpiloguePlan<'e>(pub VPlan<'e>);

/// A vectorizable loop body, four lanes along the loop variable.
pub(super) enum VLoop<'s> {
    /// `buf[offset] = value`, float32, `offset` advancing by one element per step.
    Store {
        buf: BufId,
        offset: &'s E,
        value: VPlan<'s>,
    },
    /// `buf[offset] = cast<uint8|int8>(value)` where clamps keep `value` (float32) inside the
    /// 8-bit range: converted and narrowed four lanes at a time, one 4-byte store.
    NarrowStore {
        buf: BufId,
        signed: bool,
        offset: &'s E,
        value: VPlan<'s>,
    },
    /// `buf[offset] = table[base + cast<int64>(f)]` with `buf` and `table` of one 8-bit type
    /// (a quantized tensor mapped through a `schedule::lut` table): `f` four lanes at a time
    /// (`index`), four byte loads, one 4-byte store.
    ByteGather {
        buf: BufId,
        offset: &'s E,
        table: BufId,
        base: Option<&'s E>,
        index: VPlan<'s>,
    },
    /// Four adjacent outputs of a float32 reduction, one accumulator per lane.
    Reduce {
        buf: BufId,
        offset: &'s E,
        fold: VFold,
        loops: &'s [(u32, crate::loops::Count)],
        body: VPlan<'s>,
        epilogue: Option<EpiloguePlan<'s>>,
    },
}

/// The vector form of `body` (a loop's statements) along `var`, or `None` when the loop
/// runs scalar: a single float32 store, an 8-bit store of a value proven in range, or a
/// float32 sum/max/min reduction producing one output per step of `var`.
pub(super) fn vector_loop<'s>(bufs: &[Buffer], var: u32, body: &'s [Stmt]) -> Option<VLoop<'s>> {
    let dtype = |b: BufId| bufs[b as usize].dtype;
    match body {
        [
            Stmt::Reduce {
                buf,
                offset,
                kind,
                loops,
                body,
                epilogue,
            },
        ] => {
            let fold = fold(*kind)?;
            if dtype(*buf) != DType::F32
                || body.dtype != DType::F32
                || linear_coeff(offset, var) != Some(1)
            {
                return None;
            }
            let body = plan(bufs, var, body, Mode::Body)?;
            let epilogue = match epilogue {
                Some(e) if e.dtype != DType::F32 => return None,
                Some(e) => Some(EpiloguePlan(plan(bufs, var, e, Mode::Epilogue)?)),
                None => None,
            };
            Some(VLoop::Reduce {
                buf: *buf,
                offset,
                fold,
                loops,
                body,
                epilogue,
            })
        }
        [Stmt::Store { buf, offset, value }] => {
            if linear_coeff(offset, var) != Some(1) {
                return None;
            }
            let bdt = dtype(*buf);
            if let ExprKind::Load { input, index } = &value.kind
                && matches!(bdt, DType::U8 | DType::I8)
                && dtype(*input) == bdt
                && value.dtype == bdt
                && !mentions_acc(&index[0])
            {
                let (base, f) = gather_index(&index[0], var)?;
                return Some(VLoop::ByteGather {
                    buf: *buf,
                    offset,
                    table: *input,
                    base,
                    index: plan(bufs, var, f, Mode::Body)?,
                });
            }
            if let Some(inner) = narrow_store(bdt, value) {
                return Some(VLoop::NarrowStore {
                    buf: *buf,
                    signed: bdt == DType::I8,
                    offset,
                    value: plan(bufs, var, inner, Mode::Body)?,
                });
            }
            if bdt != DType::F32 || value.dtype != DType::F32 {
                return None;
            }
            Some(VLoop::Store {
                buf: *buf,
                offset,
                value: plan(bufs, var, value, Mode::Body)?,
            })
        }
        _ => None,
    }
}

/// The fold and the vector plan of a reduction's `body` along its innermost loop, whose
/// f32x4 accumulators then advance four elements at a time; `None` when it runs scalar.
pub(super) fn vector_reduction<'e>(
    bufs: &[Buffer],
    kind: ReduceKind,
    loops: &[(u32, i64)],
    body: &'e E,
) -> Option<(VFold, VPlan<'e>)> {
    let &(var, extent) = loops.last()?;
    if body.dtype != DType::F32 || extent < 8 {
        return None;
    }
    let fold = fold(kind)?;
    Some((fold, plan(bufs, var, body, Mode::Body)?))
}

impl VFold {
    /// The fold's identity in float32.
    pub(super) fn init(self) -> f32 {
        let kind = match self {
            VFold::Sum => ReduceKind::Sum,
            VFold::Max => ReduceKind::Max,
            VFold::Min => ReduceKind::Min,
        };
        crate::ir::interp::reduce_init(kind, DType::F32).as_f64() as f32
    }
}

fn fold(kind: ReduceKind) -> Option<VFold> {
    match kind {
        ReduceKind::Sum => Some(VFold::Sum),
        ReduceKind::Max => Some(VFold::Max),
        ReduceKind::Min => Some(VFold::Min),
        ReduceKind::Prod | ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. } => None,
    }
}

/// What an expression is planned as.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
enum Mode {
    /// A stored value or a reduction's body: it reads no accumulator.
    Body,
    /// A reduction's epilogue, reading the vector accumulator. Stricter than `Body`: a
    /// subexpression that does not vary along the loop (computed as a scalar all the same)
    /// must itself be made of operations with a vector form.
    Epilogue,
}

fn plan<'e>(bufs: &[Buffer], var: u32, e: &'e E, mode: Mode) -> Option<VPlan<'e>> {
    let mut p = Planner {
        bufs,
        var,
        nodes: Vec::new(),
        planned: HashMap::new(),
        varies: HashMap::new(),
    };
    let root = p.node(e, mode)?;
    Some(VPlan {
        nodes: p.nodes,
        root,
    })
}

struct Planner<'b, 'e> {
    bufs: &'b [Buffer],
    var: u32,
    nodes: Vec<VNode<'e>>,
    planned: HashMap<(*const Expr, Mode), VIx>,
    /// `varies`' memo.
    varies: HashMap<*const Expr, bool>,
}

impl<'e> Planner<'_, 'e> {
    /// Plans `e` (its operands first) and returns its position.
    fn node(&mut self, e: &'e E, mode: Mode) -> Option<VIx> {
        let key = (Arc::as_ptr(e), mode);
        if let Some(&ix) = self.planned.get(&key) {
            return Some(ix);
        }
        let form = self.form(e, mode)?;
        self.nodes.push(VNode { expr: e, form });
        let ix = self.nodes.len() - 1;
        self.planned.insert(key, ix);
        Some(ix)
    }

    fn form(&mut self, e: &'e E, mode: Mode) -> Option<VForm<'e>> {
        if is_acc(e) {
            return (mode == Mode::Epilogue).then_some(VForm::Acc);
        }
        if !varies(e, self.var, &mut self.varies) {
            let leaf = matches!(
                e.kind,
                ExprKind::Load { .. } | ExprKind::Var(_) | ExprKind::Const(_)
            );
            if mode == Mode::Epilogue && !leaf && !all_ops_vector(e) {
                return None;
            }
            return Some(VForm::Uniform);
        }
        match &e.kind {
            ExprKind::Load { input, index } => {
                // An index computed from the accumulator would need it per lane. An empty
                // buffer is never read (`FnCx::load`), which the scalar form keeps.
                let b = &self.bufs[*input as usize];
                if b.dtype == DType::Bool
                    && e.dtype == DType::Bool
                    && b.len > 0
                    && !mentions_acc(&index[0])
                    && linear_coeff(&index[0], self.var) == Some(1)
                {
                    return Some(VForm::Bools {
                        buf: *input,
                        index: &index[0],
                    });
                }
                if b.dtype != DType::F32 || b.len == 0 || mentions_acc(&index[0]) {
                    return None;
                }
                if let Some(stride) = linear_coeff(&index[0], self.var) {
                    return Some(VForm::Load {
                        buf: *input,
                        index: &index[0],
                        stride: Stride::Fixed(stride),
                    });
                }
                if let Some(stride) = linear_coeff_expr(&index[0], self.var)
                    && integer_arith(&stride)
                {
                    return Some(VForm::Load {
                        buf: *input,
                        index: &index[0],
                        stride: Stride::Run(stride),
                    });
                }
                let (base, f) = gather_index(&index[0], self.var)?;
                let at = self.node(f, Mode::Body)?;
                Some(VForm::Gather {
                    buf: *input,
                    base,
                    at,
                })
            }
            ExprKind::Cast(_) => {
                let empty = |buf: BufId| self.bufs[buf as usize].len == 0;
                if let Some((buf, index)) = word_load(self.bufs, e, self.var) {
                    return (!empty(buf)).then_some(VForm::Words {
                        buf,
                        index,
                        plus: None,
                    });
                }
                if let Some((buf, index, plus)) = word_sum(self.bufs, e, self.var, &mut self.varies)
                {
                    let plus = self.node(plus, mode)?;
                    return (!empty(buf)).then_some(VForm::Words {
                        buf,
                        index,
                        plus: Some(plus),
                    });
                }
                let (buf, signed, index) = byte_load(self.bufs, e, self.var)?;
                (!empty(buf)).then_some(VForm::Bytes { buf, signed, index })
            }
            ExprKind::Unary(..) | ExprKind::Binary(..) | ExprKind::Select(..) => {
                Some(match op_form(e)? {
                    VOp::Unary(op, a) => VForm::Unary(op, self.node(a, mode)?),
                    VOp::PowConst(a, y) => VForm::PowConst(self.node(a, mode)?, y),
                    VOp::Scale(a, c) => VForm::Scale(self.node(a, mode)?, c),
                    VOp::Clamp(op, x, c) => VForm::Clamp(op, self.node(x, mode)?, c),
                    VOp::Arith(op, a, b) => {
                        VForm::Arith(op, self.node(a, mode)?, self.node(b, mode)?)
                    }
                    VOp::Compare(cc, a, b) => {
                        VForm::Compare(cc, self.node(a, mode)?, self.node(b, mode)?)
                    }
                    VOp::Logic(op, a, b) => {
                        VForm::Logic(op, self.node(a, mode)?, self.node(b, mode)?)
                    }
                    VOp::Select(c, a, b) => VForm::Select(
                        self.node(c, mode)?,
                        self.node(a, mode)?,
                        self.node(b, mode)?,
                    ),
                })
            }
            ExprKind::Var(_) | ExprKind::Const(_) | ExprKind::CheckIndex { .. } => None,
        }
    }
}

/// The vector operation at the root of `e`, with the operands it computes in vector form
/// (a constant exponent or clamp bound is folded into the operation).
enum VOp<'e> {
    Unary(VUnary, &'e E),
    PowConst(&'e E, f32),
    Scale(&'e E, f32),
    Clamp(BinOp, &'e E, f64),
    Arith(VArith, &'e E, &'e E),
    Compare(FloatCC, &'e E, &'e E),
    Logic(VLogic, &'e E, &'e E),
    Select(&'e E, &'e E, &'e E),
}

fn op_form(e: &E) -> Option<VOp<'_>> {
    match &e.kind {
        ExprKind::Unary(op, a) if a.dtype == DType::F32 => {
            let u = match op {
                UnOp::Neg => VUnary::Neg,
                UnOp::Abs => VUnary::Abs,
                UnOp::Sqrt => VUnary::Sqrt,
                UnOp::Floor => VUnary::Floor,
                UnOp::Ceil => VUnary::Ceil,
                UnOp::Round => VUnary::Round,
                UnOp::Trunc => VUnary::Trunc,
                UnOp::Exp => VUnary::Exp,
                UnOp::Log => VUnary::Log,
                UnOp::Tanh => VUnary::Tanh,
                UnOp::Erf => VUnary::Erf,
                UnOp::Sigmoid => VUnary::Sigmoid,
                _ => return None,
            };
            Some(VOp::Unary(u, a))
        }
        ExprKind::Binary(op, a, b) if a.dtype == DType::Bool => match op {
            BinOp::And => Some(VOp::Logic(VLogic::And, a, b)),
            BinOp::Or => Some(VOp::Logic(VLogic::Or, a, b)),
            _ => None,
        },
        ExprKind::Binary(op, a, b) if a.dtype == DType::F32 => {
            if let Some(y) = b.as_const().filter(|_| *op == BinOp::Pow) {
                return Some(VOp::PowConst(a, y.as_f64() as f32));
            }
            if let Some(r) = b
                .as_const()
                .filter(|_| *op == BinOp::Div)
                .and_then(|c| exact_reciprocal(c.as_f64() as f32))
            {
                return Some(VOp::Scale(a, r));
            }
            if let Some((x, c)) = clamp_const(*op, a, b) {
                return Some(VOp::Clamp(*op, x, c));
            }
            let arith = |v| Some(VOp::Arith(v, a, b));
            let cmp = |cc| Some(VOp::Compare(cc, a, b));
            match op {
                BinOp::Add => arith(VArith::Add),
                BinOp::Sub => arith(VArith::Sub),
                BinOp::Mul => arith(VArith::Mul),
                BinOp::Div => arith(VArith::Div),
                BinOp::Max => arith(VArith::Max),
                BinOp::Min => arith(VArith::Min),
                BinOp::Eq => cmp(FloatCC::Equal),
                BinOp::Lt => cmp(FloatCC::LessThan),
                BinOp::Le => cmp(FloatCC::LessThanOrEqual),
                BinOp::Gt => cmp(FloatCC::GreaterThan),
                BinOp::Ge => cmp(FloatCC::GreaterThanOrEqual),
                _ => None,
            }
        }
        ExprKind::Select(c, a, b) if a.dtype == DType::F32 => Some(VOp::Select(c, a, b)),
        _ => None,
    }
}

/// `1/c` when `c` is a power of two whose reciprocal is a normal float32: `x / c` and
/// `x · (1/c)` are then the same real number, rounded alike (subnormal results included).
fn exact_reciprocal(c: f32) -> Option<f32> {
    let r = 1.0 / c;
    (c.is_normal() && r.is_normal() && c.to_bits() & 0x007f_ffff == 0).then_some(r)
}

/// Whether every operation in `e` (loads, variables and constants are leaves) has a
/// vector form: `Mode::Epilogue`'s rule for subexpressions that do not vary along the loop.
fn all_ops_vector(e: &E) -> bool {
    match e.kind {
        ExprKind::Load { .. } | ExprKind::Var(_) | ExprKind::Const(_) => true,
        _ => op_form(e).is_some() && e.children().into_iter().all(all_ops_vector),
    }
}

/// `(buffer, signed, index)` when `e` is `cast<float32>` of a uint8/int8 load contiguous
/// along `var`.
fn byte_load<'e>(bufs: &[Buffer], e: &'e E, var: u32) -> Option<(BufId, bool, &'e E)> {
    let ExprKind::Cast(x) = &e.kind else {
        return None;
    };
    let ExprKind::Load { input, index } = &x.kind else {
        return None;
    };
    if e.dtype != DType::F32 || *input == EPILOGUE_ACC || linear_coeff(&index[0], var) != Some(1) {
        return None;
    }
    match bufs[*input as usize].dtype {
        DType::U8 if x.dtype == DType::U8 => Some((*input, false, &index[0])),
        DType::I8 if x.dtype == DType::I8 => Some((*input, true, &index[0])),
        _ => None,
    }
}

/// `(buffer, index)` when `e` is `cast<float32>` of an int32 load contiguous along `var`.
fn word_load<'e>(bufs: &[Buffer], e: &'e E, var: u32) -> Option<(BufId, &'e E)> {
    let ExprKind::Cast(x) = &e.kind else {
        return None;
    };
    let ExprKind::Load { input, index } = &x.kind else {
        return None;
    };
    (e.dtype == DType::F32
        && x.dtype == DType::I32
        && *input != EPILOGUE_ACC
        && bufs[*input as usize].dtype == DType::I32
        && linear_coeff(&index[0], var) == Some(1))
    .then_some((*input, &index[0]))
}

/// `(buffer, index, addend)` when `e` is `cast<float32>(a + b)` of int32 operands, one an
/// int32 load contiguous along `var` and the other not varying along it.
fn word_sum<'e>(
    bufs: &[Buffer],
    e: &'e E,
    var: u32,
    memo: &mut HashMap<*const Expr, bool>,
) -> Option<(BufId, &'e E, &'e E)> {
    let ExprKind::Cast(x) = &e.kind else {
        return None;
    };
    let ExprKind::Binary(BinOp::Add, a, b) = &x.kind else {
        return None;
    };
    if e.dtype != DType::F32 || x.dtype != DType::I32 || a.dtype != DType::I32 {
        return None;
    }
    [(a, b), (b, a)].into_iter().find_map(|(load, plus)| {
        let ExprKind::Load { input, index } = &load.kind else {
            return None;
        };
        (*input != EPILOGUE_ACC
            && plus.dtype == DType::I32
            && bufs[*input as usize].dtype == DType::I32
            && linear_coeff(&index[0], var) == Some(1)
            && !varies(plus, var, memo))
        .then_some((*input, &index[0], plus))
    })
}

/// An offset `cast<int64>(f)` or `base + cast<int64>(f)` with `base` constant along the loop
/// over `var`: a data-dependent read the vector loop makes lane by lane. Returns `base` and
/// the float32 `f`.
fn gather_index(offset: &E, var: u32) -> Option<(Option<&E>, &E)> {
    /// The float32 operand of `cast<int64>(f)`.
    fn float_of(e: &E) -> Option<&E> {
        match &e.kind {
            ExprKind::Cast(f) if e.dtype == DType::I64 && f.dtype == DType::F32 => Some(f),
            _ => None,
        }
    }
    if let Some(f) = float_of(offset) {
        return Some((None, f));
    }
    let ExprKind::Binary(BinOp::Add, a, b) = &offset.kind else {
        return None;
    };
    [(a, b), (b, a)].into_iter().find_map(|(cast, base)| {
        let f = float_of(cast)?;
        (linear_coeff(base, var) == Some(0)).then_some((Some(base), f))
    })
}

/// The float32 operand of a store `cast<u8|i8>(x)` into an 8-bit buffer where `x`'s clamps
/// keep it inside the type's range (a quantized value): the vector loop converts four lanes
/// and stores four bytes. Out-of-range values wrap under `Cast` but saturate in the vector
/// narrows, so only proven ranges qualify (NaN converts to 0 either way).
fn narrow_store(buf: DType, value: &E) -> Option<&E> {
    if !matches!(buf, DType::U8 | DType::I8) || value.dtype != buf {
        return None;
    }
    let ExprKind::Cast(x) = &value.kind else {
        return None;
    };
    if x.dtype != DType::F32 {
        return None;
    }
    let (lo, hi) = crate::ir::expr::float_bounds(x);
    let (tlo, thi) = if buf == DType::U8 {
        (0.0, 255.0)
    } else {
        (-128.0, 127.0)
    };
    (lo >= tlo && hi <= thi).then_some(x)
}

fn is_acc(e: &E) -> bool {
    matches!(
        e.kind,
        ExprKind::Load {
            input: EPILOGUE_ACC,
            ..
        }
    )
}

/// Whether `e` reads a reduction's accumulator anywhere.
/// Whether `e` changes along the loop over `var`: it reads that variable or the epilogue's
/// accumulator (`depends_on` and `mentions_acc` together), memoized over the DAG so walks
/// that ask it of every node stay linear in the body's size.
pub(super) fn varies(e: &E, var: u32, memo: &mut HashMap<*const Expr, bool>) -> bool {
    if let Some(&v) = memo.get(&Arc::as_ptr(e)) {
        return v;
    }
    let v = match e.kind {
        ExprKind::Var(v) => v == var,
        ExprKind::Load { input, .. } if input == EPILOGUE_ACC => true,
        _ => e.children().iter().any(|c| varies(c, var, memo)),
    };
    memo.insert(Arc::as_ptr(e), v);
    v
}

/// Whether `e` is integer arithmetic of vars (the run-time dims', outer loops') and
/// constants only: no load, check or conversion, so scalar code computes it with no
/// branch.
fn integer_arith(e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Const(_) => e.dtype == DType::I64,
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b) => {
            integer_arith(a) && integer_arith(b)
        }
        _ => false,
    }
}

pub(super) fn mentions_acc(e: &E) -> bool {
    let mut used = Vec::new();
    crate::ir::expr::used_inputs(e, &mut used);
    used.contains(&EPILOGUE_ACC)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::expr::{self as x, var};
    use crate::loops::Loc;

    /// Buffers 0..: float32, int64, uint8, float32, int8, uint8.
    fn bufs() -> Vec<Buffer> {
        [
            DType::F32,
            DType::I64,
            DType::U8,
            DType::F32,
            DType::I8,
            DType::U8,
            DType::I32,
        ]
        .iter()
        .enumerate()
        .map(|(k, &dtype)| Buffer {
            dtype,
            len: 1 << 20,
            loc: Loc::Input(k),
            offset: 0,
            offset_at: None,
        })
        .collect()
    }

    /// `buf0[v1·64 + v0]`, contiguous along v0 (the vector loop), v1 an outer loop.
    fn at(buf: u32, dt: DType) -> E {
        x::load(dt, buf, vec![x::add(x::mul(var(1), x::i(64)), var(0))])
    }

    fn describe(p: &VPlan<'_>) -> String {
        let forms: Vec<String> = p
            .nodes
            .iter()
            .map(|n| match &n.form {
                VForm::Uniform => "uniform".into(),
                VForm::Acc => "acc".into(),
                VForm::Load {
                    stride: Stride::Fixed(s),
                    buf,
                    ..
                } => format!("load{buf}/{s}"),
                VForm::Load { buf, .. } => format!("load{buf}/run"),
                VForm::Gather { buf, base, at } => match base {
                    Some(_) => format!("gather{buf}[row + #{at}]"),
                    None => format!("gather{buf}[#{at}]"),
                },
                VForm::Bytes { buf, signed, .. } => format!("bytes{buf}/{signed}"),
                VForm::Words {
                    buf, plus: None, ..
                } => format!("words{buf}"),
                VForm::Words {
                    buf, plus: Some(p), ..
                } => format!("words{buf}+#{p}"),
                VForm::Bools { buf, .. } => format!("bools{buf}"),
                VForm::Unary(op, a) => format!("{op:?}(#{a})"),
                VForm::PowConst(a, y) => format!("pow(#{a}, {y})"),
                VForm::Scale(a, c) => format!("scale(#{a}, {c})"),
                VForm::Clamp(op, a, c) => format!("clamp{op:?}(#{a}, {c})"),
                VForm::Arith(op, a, b) => format!("{op:?}(#{a}, #{b})"),
                VForm::Compare(cc, a, b) => format!("{cc}(#{a}, #{b})"),
                VForm::Logic(op, a, b) => format!("{op:?}(#{a}, #{b})"),
                VForm::Select(c, a, b) => format!("select(#{c}, #{a}, #{b})"),
            })
            .collect();
        assert_eq!(p.root, p.nodes.len() - 1, "the expression is planned last");
        forms.join(" ")
    }

    /// The plan of a loop over v0 storing `value` into `buf` (float32 buffer 3 or int8 4),
    /// or "scalar".
    fn store(buf: BufId, value: E) -> String {
        let body = [Stmt::Store {
            buf,
            offset: x::add(x::mul(var(1), x::i(64)), var(0)),
            value,
        }];
        match vector_loop(&bufs(), 0, &body) {
            None => "scalar".into(),
            Some(VLoop::Store { value, .. }) => describe(&value),
            Some(VLoop::NarrowStore { value, signed, .. }) => {
                format!("narrow/{signed}: {}", describe(&value))
            }
            Some(VLoop::ByteGather {
                table, base, index, ..
            }) => format!(
                "bytes of {table}[{}#{}]: {}",
                if base.is_some() { "row + " } else { "" },
                index.root,
                describe(&index)
            ),
            Some(VLoop::Reduce { .. }) => unreachable!("a store"),
        }
    }

    /// The plans of four adjacent sums over v2 (one per v0) with `epilogue`, or "scalar".
    fn reduce_outer(body: E, epilogue: Option<E>) -> String {
        let s = [Stmt::Reduce {
            buf: 3,
            offset: x::add(x::mul(var(1), x::i(64)), var(0)),
            kind: ReduceKind::Sum,
            loops: vec![(2, crate::loops::Count::Fixed(9))],
            body,
            epilogue,
        }];
        match vector_loop(&bufs(), 0, &s) {
            None => "scalar".into(),
            Some(VLoop::Reduce { body, epilogue, .. }) => format!(
                "{} then {}",
                describe(&body),
                epilogue.map(|e| describe(&e.0)).unwrap_or_default()
            ),
            Some(_) => unreachable!("a reduction"),
        }
    }

    fn acc() -> E {
        x::load(DType::F32, EPILOGUE_ACC, vec![])
    }

    #[test]
    fn stores_plan_each_node_once_in_its_vector_form() {
        let f32 = DType::F32;
        let e = x::unary(UnOp::Exp, at(0, f32));
        // Shared subexpressions are planned once; invariants are uniform.
        let row = x::load(f32, 0, vec![var(1)]);
        let prod = x::mul(e.clone(), e.clone());
        assert_eq!(
            store(3, x::add(prod, row)),
            "load0/1 Exp(#0) Mul(#1, #1) uniform Add(#2, #3)"
        );
        // Strided loads, comparisons, selects and logic on masks.
        let strided = x::load(f32, 0, vec![x::mul(var(0), x::i(3))]);
        let pos = x::lt(x::f(f32, 0.0), strided.clone());
        let both = x::and(pos.clone(), x::lt(strided.clone(), x::f(f32, 6.0)));
        assert_eq!(
            store(3, x::select(both, strided.clone(), x::f(f32, 0.0))),
            "uniform load0/3 lt(#0, #1) uniform lt(#1, #3) And(#2, #4) uniform select(#5, #1, #6)"
        );
        // Clamps against constants and constant powers fold their constant in.
        assert_eq!(
            store(3, x::max(x::f(f32, 0.0), at(0, f32))),
            "load0/1 clampMax(#0, 0)"
        );
        assert_eq!(
            store(3, x::binary(BinOp::Pow, at(0, f32), x::f(f32, 0.5))),
            "load0/1 pow(#0, 0.5)"
        );
        // A read at a computed float index is a gather; bytes are widened.
        let table = x::load(f32, 0, vec![x::cast(at(3, f32), DType::I64)]);
        assert_eq!(store(3, table), "load3/1 gather0[#0]");
        // A per-channel table: its row does not vary along the loop.
        let row = x::mul(var(1), x::i(257));
        let index = x::add(row.clone(), x::cast(at(3, f32), DType::I64));
        let table = x::load(f32, 0, vec![index.clone()]);
        assert_eq!(store(3, table), "load3/1 gather0[row + #0]");
        let moving = x::add(var(0), x::cast(at(3, f32), DType::I64));
        assert_eq!(store(3, x::load(f32, 0, vec![moving])), "scalar");
        // A stride a run-time dim sizes (a transposed read of `[7, 16·d]`): lanes apart by
        // a scalar computed once; one that reads memory stays scalar.
        let d = var(crate::loops::DIM_VAR);
        let across = x::add(x::mul(var(0), x::mul(x::i(16), d)), var(1));
        let e = x::unary(UnOp::Exp, x::load(f32, 0, vec![across]));
        assert_eq!(store(3, e), "load0/run Exp(#0)");
        let read = x::load(DType::I64, 1, vec![x::i(0)]);
        let across = x::add(x::mul(var(0), read), var(1));
        assert_eq!(store(3, x::load(f32, 0, vec![across])), "scalar");
        assert_eq!(store(3, x::cast(at(2, DType::U8), f32)), "bytes2/false");
        // int32 sums plus a per-channel int32 bias that does not vary along the loop; a
        // second varying int32 operand has no vector form.
        let i32 = DType::I32;
        let bias = x::load(i32, 6, vec![var(1)]);
        assert_eq!(
            store(3, x::cast(x::add(at(6, i32), bias.clone()), f32)),
            "uniform words6+#0"
        );
        assert_eq!(
            store(3, x::cast(x::add(bias, at(6, i32)), f32)),
            "uniform words6+#0"
        );
        assert_eq!(
            store(3, x::cast(x::add(at(6, i32), at(6, i32)), f32)),
            "scalar"
        );
    }

    #[test]
    fn loops_without_a_vector_form_run_scalar() {
        let f32 = DType::F32;
        // An integer load, the loop variable itself, an index check, a libm-only function.
        assert_eq!(store(3, x::cast(at(1, DType::I64), f32)), "scalar");
        assert_eq!(store(3, x::cast(var(0), f32)), "scalar");
        let checked = x::load(f32, 0, vec![x::check_index(var(0), 10)]);
        assert_eq!(store(3, checked), "scalar");
        assert_eq!(store(3, x::unary(UnOp::Sin, at(0, f32))), "scalar");
        // A store whose offset is not contiguous along the loop.
        let body = [Stmt::Store {
            buf: 3,
            offset: x::mul(var(0), x::i(2)),
            value: at(0, f32),
        }];
        assert!(vector_loop(&bufs(), 0, &body).is_none());
    }

    #[test]
    fn byte_stores_need_a_value_proven_in_range() {
        let f32 = DType::F32;
        let v = x::unary(UnOp::Round, at(0, f32));
        let clamped = x::max(x::f(f32, -128.0), x::min(x::f(f32, 127.0), v.clone()));
        assert_eq!(
            store(4, x::cast(clamped, DType::I8)),
            "narrow/true: load0/1 Round(#0) clampMin(#1, 127) clampMax(#2, -128)"
        );
        assert_eq!(store(4, x::cast(v, DType::I8)), "scalar");
    }

    #[test]
    fn byte_tables_map_bytes_to_bytes_four_at_a_time() {
        let (f32, u8) = (DType::F32, DType::U8);
        // A quantized tensor through a per-channel table: uint8 out of a uint8 table.
        let key = x::cast(x::unary(UnOp::Round, at(0, f32)), DType::I64);
        let index = x::add(x::mul(var(1), x::i(257)), key.clone());
        assert_eq!(
            store(5, x::load(u8, 2, vec![index])),
            "bytes of 2[row + #1]: load0/1 Round(#0)"
        );
        assert_eq!(
            store(5, x::load(u8, 2, vec![key])),
            "bytes of 2[#1]: load0/1 Round(#0)"
        );
        // Not a table read (a copy), or a table of another type: scalar.
        assert_eq!(store(5, at(2, u8)), "scalar");
        let other = x::cast(x::unary(UnOp::Round, at(0, f32)), DType::I64);
        assert_eq!(store(4, x::load(u8, 2, vec![other])), "scalar");
    }

    #[test]
    fn reductions_along_the_reduced_axis_need_eight_float_elements() {
        let plan = |kind, extent, body: &E| {
            vector_reduction(&bufs(), kind, &[(1, 4), (0, extent)], body)
                .map(|(fold, p)| format!("{fold:?}: {}", describe(&p)))
        };
        let body = x::unary(UnOp::Exp, at(0, DType::F32));
        assert_eq!(
            plan(ReduceKind::Max, 8, &body).as_deref(),
            Some("Max: load0/1 Exp(#0)")
        );
        assert_eq!(plan(ReduceKind::Sum, 7, &body), None);
        assert_eq!(plan(ReduceKind::Prod, 64, &body), None);
        assert_eq!(plan(ReduceKind::Sum, 64, &at(1, DType::I64)), None);
    }

    /// An epilogue reads the accumulator per lane; its invariant parts are scalar code, but
    /// only when every operation in them has a vector form, and it reads no bytes.
    #[test]
    fn epilogues_read_the_accumulator_and_keep_the_stricter_rule_for_invariants() {
        let f32 = DType::F32;
        let body = at(0, f32);
        let row_scale = x::load(f32, 3, vec![var(1)]);
        assert_eq!(
            reduce_outer(
                body.clone(),
                Some(x::max(x::f(f32, 0.0), x::mul(acc(), row_scale)))
            ),
            "load0/1 then acc uniform Mul(#0, #1) clampMax(#2, 0)"
        );
        let sqrt_row = x::unary(UnOp::Sqrt, x::load(f32, 3, vec![var(1)]));
        assert_eq!(
            reduce_outer(body.clone(), Some(x::binary(BinOp::Div, acc(), sqrt_row))),
            "load0/1 then acc uniform Div(#0, #1)"
        );
        let int_row = x::cast(x::load(DType::I64, 1, vec![var(1)]), f32);
        assert_eq!(
            reduce_outer(body.clone(), Some(x::mul(acc(), int_row.clone()))),
            "scalar"
        );
        // An 8-bit load contiguous along the loop (a dequantized input beside an LRN's sum).
        let bytes = x::cast(at(2, DType::U8), f32);
        assert_eq!(
            reduce_outer(body.clone(), Some(x::add(acc(), bytes))),
            "load0/1 then acc bytes2/false Add(#0, #1)"
        );
        // The same invariant cast is a uniform value in a reduction's body.
        assert_eq!(
            reduce_outer(x::mul(body, int_row), None),
            "load0/1 uniform Mul(#0, #1) then "
        );
    }
}
