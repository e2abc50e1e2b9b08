//! Epilogue fusion for GEMM-class kernels: recognizes an elementwise consumer chain of the form
//! `clamp(acc · s[c] + b[c] + residual, lo, hi)` (BatchNorm folded to an affine map, bias,
//! a residual add, ReLU/ReLU6/Clip), where `s` and `b` are computable from constants per
//! channel `c`. The kernel then applies it while the output tile is in registers.

use crate::ir::expr::{BinOp, E, ExprKind};
use crate::ir::interp::Program;
use crate::ir::{DType, Graph, Tensor, ValueId};
use std::sync::Arc;

/// A matched epilogue: per-channel scale and bias (folded into the kernel's weights and bias),
/// an optional residual operand (index into the consumer's operands) and a clamp range.
#[derive(Debug, Clone)]
pub struct Matched {
    pub scale: Option<Vec<f32>>,
    pub bias: Option<Vec<f32>>,
    pub residual: Option<u32>,
    pub lo: f32,
    pub hi: f32,
}

struct Cx<'a> {
    g: &'a Graph,
    operands: &'a [ValueId],
    acc: u32,
    /// The kernel output's dims.
    dims: &'a [i64],
    chan: usize,
}

/// Whether `index` reads the element a map over a tensor of rank `rank` computes: exactly
/// `[v0, …, v(rank-1)]`.
pub fn reads_own_element(index: &[E], rank: usize) -> bool {
    index.len() == rank
        && (index.iter().enumerate())
            .all(|(d, i)| matches!(i.kind, ExprKind::Var(v) if v as usize == d))
}

impl Cx<'_> {
    fn is_acc(&self, e: &E) -> bool {
        matches!(&e.kind, ExprKind::Load { input, index } if *input == self.acc && self.identity(index))
    }

    fn identity(&self, index: &[E]) -> bool {
        reads_own_element(index, self.dims.len())
    }

    /// Depends only on constants and the channel variable (the var of a dim of extent 1 is
    /// a constant 0: a `[C, 1, 1]` scale of a 1 × 1 map is read at `[v1, v2, v3]`).
    fn chan_const(&self, e: &E) -> bool {
        match &e.kind {
            ExprKind::Var(v) => *v as usize == self.chan || self.dims.get(*v as usize) == Some(&1),
            ExprKind::Const(_) => true,
            ExprKind::Load { input, index } => {
                *input != self.acc
                    && self.g.const_value(self.operands[*input as usize]).is_some()
                    && index.iter().all(|i| self.chan_const(i))
            }
            ExprKind::CheckIndex { .. } => false,
            _ => e.children().iter().all(|c| self.chan_const(c)),
        }
    }

    /// A residual: a load of a non-constant operand (other than acc) at the identity index.
    fn residual(&self, e: &E) -> Option<u32> {
        match &e.kind {
            ExprKind::Load { input, index }
                if *input != self.acc
                    && self.identity(index)
                    && self.g.const_value(self.operands[*input as usize]).is_none() =>
            {
                Some(*input)
            }
            _ => None,
        }
    }

    /// `e = s·acc + b (+ residual)` with `s`, `b` channel-constant expressions.
    fn linear(&self, e: &E) -> Option<(E, E, Option<u32>)> {
        let dt = e.dtype;
        let one = crate::ir::expr::f(dt, 1.0);
        let zero = crate::ir::expr::f(dt, 0.0);
        if self.is_acc(e) {
            return Some((one, zero, None));
        }
        match &e.kind {
            ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), x, y) => {
                let sub = *op == BinOp::Sub;
                let neg = |v: E| crate::ir::expr::unary(crate::ir::expr::UnOp::Neg, v);
                if let Some((s, b, r)) = self.linear(x) {
                    if self.chan_const(y) {
                        let y = if sub { neg(y.clone()) } else { y.clone() };
                        return Some((s, crate::ir::expr::binary(BinOp::Add, b, y), r));
                    }
                    if !sub
                        && r.is_none()
                        && let Some(ry) = self.residual(y)
                    {
                        return Some((s, b, Some(ry)));
                    }
                    return None;
                }
                if !sub && let Some((s, b, r)) = self.linear(y) {
                    if self.chan_const(x) {
                        return Some((s, crate::ir::expr::binary(BinOp::Add, b, x.clone()), r));
                    }
                    if r.is_none()
                        && let Some(rx) = self.residual(x)
                    {
                        return Some((s, b, Some(rx)));
                    }
                }
                None
            }
            ExprKind::Binary(op @ (BinOp::Mul | BinOp::Div), x, k) if self.chan_const(k) => {
                let (s, b, r) = self.linear(x)?;
                if r.is_some() {
                    return None;
                }
                Some((
                    crate::ir::expr::binary(*op, s, k.clone()),
                    crate::ir::expr::binary(*op, b, k.clone()),
                    None,
                ))
            }
            ExprKind::Binary(BinOp::Mul, k, x) if self.chan_const(k) => {
                let (s, b, r) = self.linear(x)?;
                if r.is_some() {
                    return None;
                }
                Some((
                    crate::ir::expr::binary(BinOp::Mul, s, k.clone()),
                    crate::ir::expr::binary(BinOp::Mul, b, k.clone()),
                    None,
                ))
            }
            _ => None,
        }
    }

    /// A scalar constant (no dependence on any variable).
    fn scalar(&self, e: &E) -> Option<f32> {
        e.as_const().map(|c| c.as_f64() as f32)
    }

    /// Peels clamps off the top: `max(x, lo)`, `min(x, hi)`, `x < 0 ? 0 : x` (ReLU).
    fn clamps(&self, e: &E, lo: &mut f32, hi: &mut f32) -> E {
        match &e.kind {
            ExprKind::Binary(BinOp::Max, x, c) => match self.scalar(c) {
                Some(v) => {
                    let inner = self.clamps(x, lo, hi);
                    *lo = lo.max(v);
                    inner
                }
                None => e.clone(),
            },
            ExprKind::Binary(BinOp::Min, x, c) => match self.scalar(c) {
                Some(v) => {
                    let inner = self.clamps(x, lo, hi);
                    *hi = hi.min(v);
                    inner
                }
                None => e.clone(),
            },
            ExprKind::Select(cond, zero, x) => {
                if let ExprKind::Binary(BinOp::Lt, a, z) = &cond.kind
                    && Arc::ptr_eq(a, x) | (a == x)
                    && self.scalar(z) == Some(0.0)
                    && self.scalar(zero) == Some(0.0)
                {
                    let inner = self.clamps(x, lo, hi);
                    *lo = lo.max(0.0);
                    return inner;
                }
                e.clone()
            }
            _ => e.clone(),
        }
    }
}

/// Evaluates a channel-constant expression for channels `0..n`.
fn per_channel(
    e: &E,
    g: &Graph,
    operands: &[ValueId],
    chan: usize,
    rank: usize,
    n: i64,
) -> Option<Vec<f32>> {
    let prog = Program::new(e);
    let inputs: Vec<&Tensor> = operands
        .iter()
        .map(|&v| g.const_value(v).unwrap_or(&EMPTY))
        .collect();
    let strides: Vec<Vec<i64>> = inputs
        .iter()
        .map(|t| crate::ir::interp::strides_of(&t.shape))
        .collect();
    let mut regs = Vec::new();
    let mut vars = vec![0i64; rank];
    let mut out = Vec::with_capacity(n as usize);
    for c in 0..n {
        vars[chan] = c;
        out.push(prog.run(&vars, &inputs, &strides, &mut regs).ok()?.as_f64() as f32);
    }
    Some(out)
}

static EMPTY: std::sync::LazyLock<Tensor> =
    std::sync::LazyLock::new(|| Tensor::new(DType::F32, vec![0], vec![]));

/// Matches `body` (a map over the kernel's output of shape `dims`; `acc` is the operand
/// holding the kernel's result) against the epilogue form, channel dim `chan`.
pub fn match_epilogue(
    g: &Graph,
    body: &E,
    operands: &[ValueId],
    acc: u32,
    dims: &[i64],
    chan: usize,
) -> Option<Matched> {
    let (rank, n) = (dims.len(), dims[chan]);
    if body.dtype != DType::F32 {
        return None;
    }
    let cx = Cx {
        g,
        operands,
        acc,
        dims,
        chan,
    };
    let (mut lo, mut hi) = (f32::NEG_INFINITY, f32::INFINITY);
    let inner = cx.clamps(body, &mut lo, &mut hi);
    let (s, b, r) = cx.linear(&inner)?;
    let is = |e: &E, v: f64| e.as_const().is_some_and(|c| c.as_f64() == v);
    let scale = if is(&s, 1.0) {
        None
    } else {
        Some(per_channel(&s, g, operands, chan, rank, n)?)
    };
    let bias = if is(&b, 0.0) {
        None
    } else {
        Some(per_channel(&b, g, operands, chan, rank, n)?)
    };
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return None;
    }
    Some(Matched {
        scale,
        bias,
        residual: r,
        lo,
        hi,
    })
}
