//! The f32x4 code of the loops `vectorize` accepts: four lanes along the loop variable.
//!
//! `vector_body` emits one vector step of a store or of four adjacent reductions
//! (`vector_reduce_outer`); `veval` computes an expression as a value uniform across the
//! lanes (scalar code, splat where combined) or one per lane. `hoist_uniform` computes a
//! vector loop's expensive invariants once ahead of it, in stack slots.

use super::scalar::clamp_const;
use super::vectorize::{gather_index, narrow_store};
use super::{FnCx, PTR, vflags};
use crate::codegen::vmath;
use crate::ir::DType;
use crate::ir::expr::{BinOp, E, Expr, ExprKind, UnOp, depends_on, linear_coeff};
use crate::ir::graph::ReduceKind;
use crate::loops::{BufId, Stmt};
use crate::schedule::EPILOGUE_ACC;
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, Type, Value, types};
use std::collections::HashMap;
use std::sync::Arc;

/// A value in vector mode: the same in all lanes, or one per lane.
#[derive(Copy, Clone)]
pub(super) enum VV {
    U(Value),
    V(Value),
}

impl FnCx<'_, '_> {
    /// Computes, ahead of a vector loop over `var` whose body is a store, the maximal
    /// subexpressions that do not vary with `var`, read only buffers the function does not
    /// write and cost more than a load (divisions, square roots, transcendental functions:
    /// per-row statistics of a normalization and the arithmetic on them); the loop's body
    /// reloads them from stack slots. Cranelift's egraph elaboration places pure values at
    /// their uses and does not hoist ones whose operands include a rematerialized constant,
    /// so a value computed ahead of the loop but used inside it would be sunk back into it
    /// (measured: the LayerNorm map's two divisions and square root ran per vector); a stack
    /// slot pins it. Returns their keys.
    pub(super) fn hoist_uniform(&mut self, var: u32, body: &[Stmt]) -> Vec<*const Expr> {
        let [Stmt::Store { value, offset, .. }] = body else {
            return Vec::new();
        };
        let mut picked: Vec<E> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for e in [value, offset] {
            self.uniform_roots(e, var, &mut picked, &mut seen);
        }
        let mut memo = HashMap::new();
        let mut added = Vec::new();
        for e in picked {
            let v = self.eval(&e, &mut memo);
            let ty = self.b.func.dfg.value_type(v);
            let slot = self.b.create_sized_stack_slot(ir::StackSlotData::new(
                ir::StackSlotKind::ExplicitSlot,
                ty.bytes(),
                ty.bytes().trailing_zeros() as u8,
            ));
            self.b.ins().stack_store(PTR, v, slot, 0);
            let k = Arc::as_ptr(&e);
            self.hoisted.insert(k, (slot, ty));
            added.push(k);
        }
        added
    }

    /// Whether evaluating `e` once per vector costs more than reloading it: it contains a
    /// division, a square root or a transcendental function.
    pub(super) fn expensive(e: &E) -> bool {
        let mut found = false;
        crate::ir::expr::rewrite(e, &mut |x| {
            match &x.kind {
                ExprKind::Binary(BinOp::Div | BinOp::Rem | BinOp::FloorMod | BinOp::Pow, ..) => {
                    found = true
                }
                ExprKind::Unary(op, _) => found |= !op.is_cheap(),
                _ => {}
            }
            None
        });
        found
    }

    pub(super) fn uniform_roots(
        &self,
        e: &E,
        var: u32,
        out: &mut Vec<E>,
        seen: &mut std::collections::HashSet<*const Expr>,
    ) {
        if !seen.insert(Arc::as_ptr(e)) {
            return;
        }
        if !depends_on(e, var) && !mentions_acc(e) {
            if Self::expensive(e) && self.reads_only_inputs(e) {
                out.push(e.clone());
            }
            return;
        }
        for c in e.children() {
            self.uniform_roots(c, var, out, seen);
        }
    }

    /// Whether every load in `e` reads a buffer this function does not write.
    pub(super) fn reads_only_inputs(&self, e: &E) -> bool {
        let mut used = Vec::new();
        crate::ir::expr::used_inputs(e, &mut used);
        used.iter().all(|b| !self.written.contains(b))
    }

    pub(super) fn vector_body(&mut self, var: u32, body: &[Stmt]) {
        if let [
            Stmt::Reduce {
                buf,
                offset,
                kind,
                loops,
                body,
                epilogue,
            },
        ] = body
        {
            return self.vector_reduce_outer(
                var,
                *buf,
                offset,
                *kind,
                loops,
                body,
                epilogue.as_ref(),
            );
        }
        let [Stmt::Store { buf, offset, value }] = body else {
            return;
        };
        let mut memo = HashMap::new();
        let mut smemo = HashMap::new();
        let bdt = self.prog.buffers[*buf as usize].dtype;
        if let Some(inner) = narrow_store(bdt, value) {
            // Four float32 lanes already inside the 8-bit range: truncating conversions,
            // saturating narrows (which change nothing in range) and one 4-byte store.
            let v = self.veval(inner, var, &mut memo, &mut smemo);
            let v = self.to_vec(v, types::F32X4);
            let i = self.b.ins().fcvt_to_sint_sat(types::I32X4, v);
            let h = self.b.ins().snarrow(i, i);
            let q = if bdt == DType::U8 {
                self.b.ins().unarrow(h, h)
            } else {
                self.b.ins().snarrow(h, h)
            };
            let q = self.b.ins().bitcast(
                types::I32X4,
                MemFlagsData::new().with_endianness(ir::Endianness::Little),
                q,
            );
            let bytes = self.b.ins().extractlane(q, 0);
            let off = self.eval(offset, &mut smemo);
            let p = self.addr(*buf, off);
            self.b.ins().store(vflags(), bytes, p, 0);
            return;
        }
        let v = self.veval(value, var, &mut memo, &mut smemo);
        let v = self.to_vec(v, types::F32X4);
        let off = self.eval(offset, &mut smemo);
        let p = self.addr(*buf, off);
        self.b.ins().store(vflags(), v, p, 0);
    }

    /// Four adjacent outputs (along `var`) of a reduction, each lane its own accumulator.
    #[allow(clippy::too_many_arguments, reason = "a reduction statement's parts")]
    pub(super) fn vector_reduce_outer(
        &mut self,
        var: u32,
        buf: BufId,
        offset: &E,
        kind: ReduceKind,
        loops: &[(u32, i64)],
        body: &E,
        epilogue: Option<&E>,
    ) {
        let combine = |cx: &mut Self, a: Value, b: Value| match kind {
            ReduceKind::Sum => cx.b.ins().fadd(a, b),
            ReduceKind::Max => cx.b.ins().fmax(a, b),
            _ => cx.b.ins().fmin(a, b),
        };
        let init = crate::ir::interp::reduce_init(kind, DType::F32).as_f64() as f32;
        let acc = self.b.declare_var(types::F32X4);
        let i = self.b.ins().f32const(init);
        let iv = self.b.ins().splat(types::F32X4, i);
        self.b.def_var(acc, iv);
        self.reduce_loops(loops, &mut |cx| {
            let mut memo = HashMap::new();
            let mut smemo = HashMap::new();
            let x = cx.veval(body, var, &mut memo, &mut smemo);
            let x = cx.to_vec(x, types::F32X4);
            let a = cx.b.use_var(acc);
            let n = combine(cx, a, x);
            cx.b.def_var(acc, n);
        });
        let a = self.b.use_var(acc);
        let mut memo = HashMap::new();
        let mut smemo = HashMap::new();
        let v = match epilogue {
            Some(e) => {
                self.vacc = Some(a);
                let r = self.veval(e, var, &mut memo, &mut smemo);
                self.vacc = None;
                self.to_vec(r, types::F32X4)
            }
            None => a,
        };
        let off = self.eval(offset, &mut smemo);
        let p = self.addr(buf, off);
        self.b.ins().store(vflags(), v, p, 0);
    }

    pub(super) fn to_vec(&mut self, v: VV, ty: Type) -> Value {
        match v {
            VV::V(x) => x,
            VV::U(x) => self.b.ins().splat(ty, x),
        }
    }

    /// Mask from a scalar bool (0/1 i8): all-ones lanes when true.
    pub(super) fn mask_of(&mut self, v: VV) -> Value {
        match v {
            VV::V(m) => m,
            VV::U(b) => {
                let w = self.b.ins().uextend(types::I32, b);
                let m = self.b.ins().ineg(w);
                self.b.ins().splat(types::I32X4, m)
            }
        }
    }

    pub(super) fn veval(
        &mut self,
        e: &E,
        var: u32,
        memo: &mut HashMap<*const Expr, VV>,
        smemo: &mut HashMap<*const Expr, Value>,
    ) -> VV {
        let key = Arc::as_ptr(e);
        if let Some(v) = memo.get(&key) {
            return *v;
        }
        if let (
            ExprKind::Load {
                input: EPILOGUE_ACC,
                ..
            },
            Some(a),
        ) = (&e.kind, self.vacc)
        {
            return VV::V(a);
        }
        if !depends_on(e, var) && !(self.vacc.is_some() && mentions_acc(e)) {
            let v = VV::U(self.eval(e, smemo));
            memo.insert(key, v);
            return v;
        }
        let r = match &e.kind {
            ExprKind::Cast(_) if self.byte_load(e, var).is_some() => {
                // Four contiguous 8-bit values as float32: one 4-byte load, widened twice.
                let (input, signed, offset) = self.byte_load(e, var).expect("matched");
                let off = self.eval(offset, smemo);
                let p = self.addr(input, off);
                let fl = self.load_flags(input, vflags());
                let word = self.b.ins().load(types::I32, fl, p, 0);
                let v = self.b.ins().scalar_to_vector(types::I32X4, word);
                let v = self.b.ins().bitcast(
                    types::I8X16,
                    MemFlagsData::new().with_endianness(ir::Endianness::Little),
                    v,
                );
                let w = if signed {
                    let h = self.b.ins().swiden_low(v);
                    self.b.ins().swiden_low(h)
                } else {
                    let h = self.b.ins().uwiden_low(v);
                    self.b.ins().uwiden_low(h)
                };
                VV::V(self.b.ins().fcvt_from_sint(types::F32X4, w))
            }
            ExprKind::Load { input, index } if linear_coeff(&index[0], var).is_none() => {
                // A gather (a lookup table read at a float index, `schedule::lut`): the
                // index per lane, four scalar loads.
                let f = gather_index(&index[0]).expect("checked by vectorizable");
                let fv = self.veval(f, var, memo, smemo);
                let fv = self.to_vec(fv, types::F32X4);
                // One vector conversion (the offsets are small and non-negative), then
                // lane by lane.
                let iv = self.b.ins().fcvt_to_sint_sat(types::I32X4, fv);
                let mut vec = None;
                for lane in 0..4u8 {
                    let x = self.b.ins().extractlane(iv, lane);
                    let o = self.b.ins().uextend(PTR, x);
                    let s = self.load(*input, o);
                    vec = Some(match vec {
                        None => self.b.ins().splat(types::F32X4, s),
                        Some(v) => self.b.ins().insertlane(v, s, lane),
                    });
                }
                VV::V(vec.expect("four lanes"))
            }
            ExprKind::Load { input, index } => {
                let c = linear_coeff(&index[0], var).expect("checked by vectorizable");
                let off = self.eval(&index[0], smemo);
                if c == 1 {
                    let p = self.addr(*input, off);
                    let fl = self.load_flags(*input, vflags());
                    VV::V(self.b.ins().load(types::F32X4, fl, p, 0))
                } else {
                    let mut vec = None;
                    for lane in 0..4u8 {
                        let o = self.b.ins().iadd_imm_s(off, c * lane as i64);
                        let s = self.load(*input, o);
                        vec = Some(match vec {
                            None => self.b.ins().splat(types::F32X4, s),
                            Some(v) => self.b.ins().insertlane(v, s, lane),
                        });
                    }
                    VV::V(vec.expect("four lanes"))
                }
            }
            ExprKind::Unary(op, a) => {
                let x = self.veval(a, var, memo, smemo);
                let x = self.to_vec(x, types::F32X4);
                VV::V(match op {
                    UnOp::Neg => self.b.ins().fneg(x),
                    UnOp::Abs => self.b.ins().fabs(x),
                    UnOp::Sqrt => self.b.ins().sqrt(x),
                    UnOp::Floor => self.b.ins().floor(x),
                    UnOp::Ceil => self.b.ins().ceil(x),
                    UnOp::Round => self.b.ins().nearest(x),
                    UnOp::Exp => vmath::exp(&mut self.b, self.fma, x),
                    UnOp::Tanh => vmath::tanh(&mut self.b, self.fma, x),
                    UnOp::Erf => vmath::erf(&mut self.b, self.fma, x),
                    UnOp::Sigmoid => vmath::sigmoid(&mut self.b, self.fma, x),
                    UnOp::Log => vmath::log(&mut self.b, self.fma, x),
                    _ => self.b.ins().trunc(x),
                })
            }
            ExprKind::Binary(op, a, b) if a.dtype == DType::Bool => {
                let x = self.veval(a, var, memo, smemo);
                let y = self.veval(b, var, memo, smemo);
                let (x, y) = (self.mask_of(x), self.mask_of(y));
                VV::V(if *op == BinOp::And {
                    self.b.ins().band(x, y)
                } else {
                    self.b.ins().bor(x, y)
                })
            }
            ExprKind::Binary(BinOp::Pow, a, b) if b.as_const().is_some() => {
                let x = self.veval(a, var, memo, smemo);
                let x = self.to_vec(x, types::F32X4);
                let y = b.as_const().map(|c| c.as_f64() as f32).unwrap_or(1.0);
                VV::V(vmath::pow_const(&mut self.b, self.fma, x, y))
            }
            ExprKind::Binary(op @ (BinOp::Max | BinOp::Min), a, b)
                if a.dtype == DType::F32 && clamp_const(*op, a, b).is_some() =>
            {
                // A clamp against a constant: one minps/maxps (`clamp_insts`).
                let (x, c) = clamp_const(*op, a, b).expect("matched");
                let xv = self.veval(x, var, memo, smemo);
                let xv = self.to_vec(xv, types::F32X4);
                VV::V(self.clamp_insts(*op, xv, c))
            }
            ExprKind::Binary(op, a, b) => {
                let x = self.veval(a, var, memo, smemo);
                let y = self.veval(b, var, memo, smemo);
                let (x, y) = (self.to_vec(x, types::F32X4), self.to_vec(y, types::F32X4));
                let cmp = |cc| Some(cc);
                let cc = match op {
                    BinOp::Eq => cmp(FloatCC::Equal),
                    BinOp::Lt => cmp(FloatCC::LessThan),
                    BinOp::Le => cmp(FloatCC::LessThanOrEqual),
                    BinOp::Gt => cmp(FloatCC::GreaterThan),
                    BinOp::Ge => cmp(FloatCC::GreaterThanOrEqual),
                    _ => None,
                };
                VV::V(match (op, cc) {
                    (_, Some(cc)) => self.b.ins().fcmp(cc, x, y),
                    (BinOp::Add, _) => self.b.ins().fadd(x, y),
                    (BinOp::Sub, _) => self.b.ins().fsub(x, y),
                    (BinOp::Mul, _) => self.b.ins().fmul(x, y),
                    (BinOp::Div, _) => self.b.ins().fdiv(x, y),
                    (BinOp::Max, _) => self.b.ins().fmax(x, y),
                    _ => self.b.ins().fmin(x, y),
                })
            }
            ExprKind::Select(c, a, b) => {
                let cv = self.veval(c, var, memo, smemo);
                let x = self.veval(a, var, memo, smemo);
                let y = self.veval(b, var, memo, smemo);
                let (x, y) = (self.to_vec(x, types::F32X4), self.to_vec(y, types::F32X4));
                match cv {
                    VV::U(c) => VV::V(self.b.ins().select(c, x, y)),
                    VV::V(m) => {
                        let mf = self.b.ins().bitcast(
                            types::F32X4,
                            MemFlagsData::new().with_endianness(ir::Endianness::Little),
                            m,
                        );
                        VV::V(self.b.ins().bitselect(mf, x, y))
                    }
                }
            }
            ExprKind::Var(_)
            | ExprKind::Const(_)
            | ExprKind::Cast(_)
            | ExprKind::CheckIndex { .. } => {
                unreachable!("rejected by vectorizable")
            }
        };
        memo.insert(key, r);
        r
    }
}

pub(super) fn mentions_acc(e: &E) -> bool {
    let mut used = Vec::new();
    crate::ir::expr::used_inputs(e, &mut used);
    used.contains(&EPILOGUE_ACC)
}
