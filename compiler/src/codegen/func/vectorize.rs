//! Which innermost loops run four float32 lanes at a time (the predicate `vector` relies on).
//!
//! A loop vectorizes when its body is one float32 store (or an 8-bit store of a value clamps
//! keep in range), or one float32 sum/max/min reduction per output along the loop, and every
//! expression node varying along the loop has a vector form: a contiguous, strided, gathered
//! or 4-byte load, or an operation with an f32x4 instruction or `vmath` polynomial.

use super::FnCx;
use crate::ir::DType;
use crate::ir::expr::{BinOp, E, Expr, ExprKind, UnOp, depends_on, linear_coeff};
use crate::ir::graph::ReduceKind;
use crate::loops::{BufId, Stmt};
use crate::schedule::EPILOGUE_ACC;
use std::sync::Arc;

impl FnCx<'_, '_> {
    /// Whether `body` (a single f32 store, or a reduction producing one f32 output per `var`)
    /// can run 4 lanes at a time along `var`.
    pub(super) fn vectorizable(&self, var: u32, body: &[Stmt]) -> bool {
        if let [
            Stmt::Reduce {
                buf,
                offset,
                kind,
                body,
                epilogue,
                ..
            },
        ] = body
        {
            let out_f32 = self.prog.buffers[*buf as usize].dtype == DType::F32;
            let ep_ok = epilogue
                .as_ref()
                .is_none_or(|e| e.dtype == DType::F32 && self.vec_ok_acc(e, var));
            return out_f32
                && body.dtype == DType::F32
                && matches!(kind, ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min)
                && linear_coeff(offset, var) == Some(1)
                && self.vec_ok(body, var)
                && ep_ok;
        }
        let [Stmt::Store { buf, offset, value }] = body else {
            return false;
        };
        if linear_coeff(offset, var) != Some(1) {
            return false;
        }
        if let Some(inner) = narrow_store(self.prog.buffers[*buf as usize].dtype, value) {
            return self.vec_ok(inner, var);
        }
        if self.prog.buffers[*buf as usize].dtype != DType::F32 || value.dtype != DType::F32 {
            return false;
        }
        self.vec_ok(value, var)
    }

    pub(super) fn vec_ok(&self, e: &E, var: u32) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.vec_ok_memo(e, var, &mut seen)
    }

    /// `vec_ok` for an epilogue, whose accumulator is a vector.
    pub(super) fn vec_ok_acc(&self, e: &E, var: u32) -> bool {
        let acc_free = crate::ir::expr::rewrite(e, &mut |x| match &x.kind {
            ExprKind::Load { input, .. } if *input == EPILOGUE_ACC => Some(crate::ir::expr::load(
                x.dtype,
                EPILOGUE_ACC - 1,
                vec![crate::ir::expr::var(var)],
            )),
            _ => None,
        });
        // The placeholder buffer id never exists; check the rest of the expression.
        let mut seen = std::collections::HashSet::new();
        self.vec_ok_placeholder(&acc_free, var, &mut seen)
    }

    pub(super) fn vec_ok_placeholder(
        &self,
        e: &E,
        var: u32,
        seen: &mut std::collections::HashSet<*const Expr>,
    ) -> bool {
        if let ExprKind::Load { input, .. } = &e.kind
            && *input == EPILOGUE_ACC - 1
        {
            return true;
        }
        if !seen.insert(Arc::as_ptr(e)) {
            return true;
        }
        match &e.kind {
            ExprKind::Load { .. } | ExprKind::Var(_) | ExprKind::Const(_) => {
                self.vec_ok_memo(e, var, &mut std::collections::HashSet::new())
            }
            _ => {
                // Check this node with its children replaced by checked leaves.
                let kids_ok = e
                    .children()
                    .iter()
                    .all(|c| self.vec_ok_placeholder(c, var, seen));
                kids_ok && self.node_vec_ok(e)
            }
        }
    }

    /// The operation at the root of `e` has a vector form (children checked separately).
    pub(super) fn node_vec_ok(&self, e: &E) -> bool {
        match &e.kind {
            ExprKind::Unary(op, a) => {
                a.dtype == DType::F32
                    && matches!(
                        op,
                        UnOp::Neg
                            | UnOp::Abs
                            | UnOp::Sqrt
                            | UnOp::Floor
                            | UnOp::Ceil
                            | UnOp::Round
                            | UnOp::Trunc
                            | UnOp::Exp
                            | UnOp::Log
                            | UnOp::Tanh
                            | UnOp::Erf
                            | UnOp::Sigmoid
                    )
            }
            ExprKind::Binary(op, a, b) => {
                if a.dtype == DType::Bool {
                    return matches!(op, BinOp::And | BinOp::Or);
                }
                a.dtype == DType::F32
                    && ((*op == BinOp::Pow && b.as_const().is_some())
                        || matches!(
                            op,
                            BinOp::Add
                                | BinOp::Sub
                                | BinOp::Mul
                                | BinOp::Div
                                | BinOp::Max
                                | BinOp::Min
                                | BinOp::Eq
                                | BinOp::Lt
                                | BinOp::Le
                                | BinOp::Gt
                                | BinOp::Ge
                        ))
            }
            ExprKind::Select(_, a, _) => a.dtype == DType::F32,
            _ => false,
        }
    }

    pub(super) fn vec_ok_memo(
        &self,
        e: &E,
        var: u32,
        seen: &mut std::collections::HashSet<*const Expr>,
    ) -> bool {
        if !seen.insert(Arc::as_ptr(e)) {
            return true;
        }
        if !depends_on(e, var) {
            return !matches!(
                e.kind,
                ExprKind::Load {
                    input: EPILOGUE_ACC,
                    ..
                }
            );
        }
        match &e.kind {
            ExprKind::Var(v) => *v != var,
            ExprKind::Const(_) => matches!(e.dtype, DType::F32 | DType::I64 | DType::Bool),
            ExprKind::Load { input, index } => {
                *input != EPILOGUE_ACC
                    && self.prog.buffers[*input as usize].dtype == DType::F32
                    && (linear_coeff(&index[0], var).is_some()
                        || gather_index(&index[0]).is_some_and(|f| self.vec_ok_memo(f, var, seen)))
            }
            ExprKind::Unary(..) | ExprKind::Binary(..) | ExprKind::Select(..) => {
                self.node_vec_ok(e) && e.children().iter().all(|c| self.vec_ok_memo(c, var, seen))
            }
            ExprKind::Cast(_) => self.byte_load(e, var).is_some(),
            ExprKind::CheckIndex { .. } => false,
        }
    }

    /// `(buffer, signed, offset)` when `e` is `cast<float32>` of a uint8/int8 load contiguous
    /// along `var` (a quantized tensor read by a map): the vector loop loads four bytes.
    pub(super) fn byte_load<'e>(&self, e: &'e E, var: u32) -> Option<(BufId, bool, &'e E)> {
        let ExprKind::Cast(x) = &e.kind else {
            return None;
        };
        let ExprKind::Load { input, index } = &x.kind else {
            return None;
        };
        if e.dtype != DType::F32
            || *input == EPILOGUE_ACC
            || linear_coeff(&index[0], var) != Some(1)
        {
            return None;
        }
        match self.prog.buffers[*input as usize].dtype {
            DType::U8 if x.dtype == DType::U8 => Some((*input, false, &index[0])),
            DType::I8 if x.dtype == DType::I8 => Some((*input, true, &index[0])),
            _ => None,
        }
    }
}

/// The float32 operand of an offset `cast<int64>(f)`: a data-dependent read the vector loop
/// makes lane by lane.
pub(super) fn gather_index(offset: &E) -> Option<&E> {
    match &offset.kind {
        ExprKind::Cast(f) if offset.dtype == DType::I64 && f.dtype == DType::F32 => Some(f),
        _ => None,
    }
}

/// The float32 operand of a store `cast<u8|i8>(x)` into an 8-bit buffer where `x`'s clamps
/// keep it inside the type's range (a quantized value): the vector loop converts four lanes
/// and stores four bytes. Out-of-range values wrap under `Cast` but saturate in the vector
/// narrows, so only proven ranges qualify (NaN converts to 0 either way).
pub(super) fn narrow_store(buf: DType, value: &E) -> Option<&E> {
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
