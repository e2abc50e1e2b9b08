//! The f32x4 code of a vectorizable loop: four lanes along the loop variable.
//!
//! `vector_body` emits one vector step of a `VLoop` (a store, an 8-bit store or four
//! adjacent reductions) by translating its plans node by node (`emit_plan`): every decision
//! was taken by `vectorize`, which gave each node its form; this file only writes the CLIF
//! of each form (`VV::U`, a scalar the same in every lane, or `VV::V`, one value per lane).
//! `hoist_uniform` computes a vector loop's expensive invariants once ahead of it, in stack
//! slots the scalar code of its uniform parts reloads.

use super::vectorize::{
    EpiloguePlan, Stride, VArith, VFold, VForm, VLogic, VLoop, VNode, VPlan, VUnary,
};
use super::{FnCx, PTR, flags, vflags};
use crate::codegen::vmath;
use crate::ir::expr::{BinOp, E, Expr, ExprKind};
use crate::loops::{BufId, Stmt};
use cranelift_codegen::ir::{
    self, InstBuilder, MemFlagsData, Type, Value, condcodes::IntCC, types,
};
use std::collections::HashMap;
use std::sync::Arc;

/// A value in vector mode: the same in all lanes, or one per lane.
#[derive(Copy, Clone)]
pub(super) enum VV {
    U(Value),
    V(Value),
}

impl FnCx<'_, '_> {
    /// Computes, ahead of a loop over `var` (vector or scalar) whose body is a store, the maximal
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
        let mut varies = HashMap::new();
        for e in [value, offset] {
            self.uniform_roots(e, var, &mut picked, &mut seen, &mut varies);
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
    fn expensive(e: &E) -> bool {
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

    /// Whether `e` checks an index: evaluated ahead of a loop that may run no iteration, it
    /// could report an error the loop never makes.
    fn checks_index(e: &E) -> bool {
        let mut found = false;
        crate::ir::expr::rewrite(e, &mut |x| {
            found |= matches!(x.kind, ExprKind::CheckIndex { .. });
            None
        });
        found
    }

    fn uniform_roots(
        &self,
        e: &E,
        var: u32,
        out: &mut Vec<E>,
        seen: &mut std::collections::HashSet<*const Expr>,
        varies: &mut HashMap<*const Expr, bool>,
    ) {
        if !seen.insert(Arc::as_ptr(e)) {
            return;
        }
        if !super::vectorize::varies(e, var, varies) {
            if Self::expensive(e) && self.reads_only_inputs(e) && !Self::checks_index(e) {
                out.push(e.clone());
            }
            return;
        }
        for c in e.children() {
            self.uniform_roots(c, var, out, seen, varies);
        }
    }

    /// Whether every load in `e` reads a buffer this function does not write.
    fn reads_only_inputs(&self, e: &E) -> bool {
        let mut used = Vec::new();
        crate::ir::expr::used_inputs(e, &mut used);
        used.iter().all(|b| !self.written.contains(b))
    }

    /// One vector step (four lanes from the current value of the loop variable) of `l`.
    pub(super) fn vector_body(&mut self, l: &VLoop<'_>) {
        let mut smemo = HashMap::new();
        match l {
            VLoop::Store { buf, offset, value } => {
                let v = self.emit_value(value, &mut smemo);
                let v = self.vector_of(v, types::F32X4);
                let off = self.eval(offset, &mut smemo);
                let p = self.addr(*buf, off);
                self.b.ins().store(vflags(), v, p, 0);
            }
            VLoop::NarrowStore {
                buf,
                signed,
                offset,
                value,
            } => {
                // Four float32 lanes already inside the 8-bit range: truncating conversions,
                // saturating narrows (which change nothing in range) and one 4-byte store.
                let v = self.emit_value(value, &mut smemo);
                let v = self.vector_of(v, types::F32X4);
                let i = self.b.ins().fcvt_to_sint_sat(types::I32X4, v);
                let h = self.b.ins().snarrow(i, i);
                let q = if *signed {
                    self.b.ins().snarrow(h, h)
                } else {
                    self.b.ins().unarrow(h, h)
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
            }
            VLoop::ByteGather {
                buf,
                offset,
                table,
                base,
                index,
            } => {
                // The four table offsets converted at once (small and non-negative), four
                // byte loads gathered into one little-endian word, one 4-byte store.
                let f = self.emit_value(index, &mut smemo);
                let f = self.vector_of(f, types::F32X4);
                let iv = self.b.ins().fcvt_to_sint_sat(types::I32X4, f);
                let row = base.map(|e| self.eval(e, &mut smemo));
                let fl = self.load_flags(*table, flags());
                let mut word = None;
                for lane in 0..4u8 {
                    let o = self.gather_offset(iv, lane, row);
                    let p = self.addr(*table, o);
                    let byte = self.b.ins().uload8(types::I32, fl, p, 0);
                    word = Some(match word {
                        None => byte,
                        Some(w) => {
                            let b = self.b.ins().ishl_imm_s(byte, 8 * lane as i64);
                            self.b.ins().bor(w, b)
                        }
                    });
                }
                let word = word.expect("four lanes");
                let off = self.eval(offset, &mut smemo);
                let p = self.addr(*buf, off);
                self.b.ins().store(vflags(), word, p, 0);
            }
            VLoop::Reduce {
                buf,
                offset,
                fold,
                loops,
                body,
                epilogue,
            } => self.vector_reduce_outer(*buf, offset, *fold, loops, body, epilogue.as_ref()),
        }
    }

    /// Four adjacent outputs (along the vector loop) of a reduction, each lane its own
    /// accumulator.
    fn vector_reduce_outer(
        &mut self,
        buf: BufId,
        offset: &E,
        fold: VFold,
        loops: &[(u32, crate::loops::Count)],
        body: &VPlan<'_>,
        epilogue: Option<&EpiloguePlan<'_>>,
    ) {
        let acc = self.b.declare_var(types::F32X4);
        let i = self.b.ins().f32const(fold.init());
        let iv = self.b.ins().splat(types::F32X4, i);
        self.b.def_var(acc, iv);
        self.reduce_loops(loops, &mut |cx| {
            let mut smemo = HashMap::new();
            let x = cx.emit_value(body, &mut smemo);
            let x = cx.vector_of(x, types::F32X4);
            let a = cx.b.use_var(acc);
            let n = cx.fold_insts(fold, a, x);
            cx.b.def_var(acc, n);
        });
        let a = self.b.use_var(acc);
        let mut smemo = HashMap::new();
        let v = match epilogue {
            Some(e) => {
                let r = self.emit_epilogue(e, a, &mut smemo);
                self.vector_of(r, types::F32X4)
            }
            None => a,
        };
        let off = self.eval(offset, &mut smemo);
        let p = self.addr(buf, off);
        self.b.ins().store(vflags(), v, p, 0);
    }

    /// `a ⊕ b` for a reduction's fold, on scalars or vectors.
    pub(super) fn fold_insts(&mut self, fold: VFold, a: Value, b: Value) -> Value {
        match fold {
            VFold::Sum => self.b.ins().fadd(a, b),
            VFold::Max => self.b.ins().fmax(a, b),
            VFold::Min => self.b.ins().fmin(a, b),
        }
    }

    pub(super) fn vector_of(&mut self, v: VV, ty: Type) -> Value {
        match v {
            VV::V(x) => x,
            VV::U(x) => self.b.ins().splat(ty, x),
        }
    }

    /// Mask from a scalar bool (0/1 i8): all-ones lanes when true.
    /// The four bytes of `buf` from element `off` as four 32-bit lanes, sign- or
    /// zero-extended: one 4-byte load.
    fn four_bytes(&mut self, buf: BufId, off: Value, signed: bool) -> Value {
        let p = self.addr(buf, off);
        let fl = self.load_flags(buf, vflags());
        let word = self.b.ins().load(types::I32, fl, p, 0);
        let v = self.b.ins().scalar_to_vector(types::I32X4, word);
        let v = self.b.ins().bitcast(
            types::I8X16,
            MemFlagsData::new().with_endianness(ir::Endianness::Little),
            v,
        );
        if signed {
            let h = self.b.ins().swiden_low(v);
            self.b.ins().swiden_low(h)
        } else {
            let h = self.b.ins().uwiden_low(v);
            self.b.ins().uwiden_low(h)
        }
    }

    fn mask_of(&mut self, v: VV) -> Value {
        match v {
            VV::V(m) => m,
            VV::U(b) => {
                let w = self.b.ins().uextend(types::I32, b);
                let m = self.b.ins().ineg(w);
                self.b.ins().splat(types::I32X4, m)
            }
        }
    }

    /// The vector value of a stored value's or a reduction body's plan; `smemo` memoizes the
    /// scalar code of its uniform parts (and of the statement's offset).
    pub(super) fn emit_value(
        &mut self,
        plan: &VPlan<'_>,
        smemo: &mut HashMap<*const Expr, Value>,
    ) -> VV {
        self.emit_plan(plan, None, smemo)
    }

    /// The vector value of an epilogue reading the accumulator vector `acc`.
    fn emit_epilogue(
        &mut self,
        plan: &EpiloguePlan<'_>,
        acc: Value,
        smemo: &mut HashMap<*const Expr, Value>,
    ) -> VV {
        self.emit_plan(&plan.0, Some(acc), smemo)
    }

    /// Emits the plan's nodes in order (operands first); an expression node met twice (a
    /// table index planned as a body inside an epilogue) is computed once.
    fn emit_plan(
        &mut self,
        plan: &VPlan<'_>,
        acc: Option<Value>,
        smemo: &mut HashMap<*const Expr, Value>,
    ) -> VV {
        let mut vals: Vec<VV> = Vec::with_capacity(plan.nodes.len());
        let mut memo: HashMap<*const Expr, VV> = HashMap::new();
        for node in &plan.nodes {
            let key = Arc::as_ptr(node.expr);
            let v = match memo.get(&key) {
                Some(&v) => v,
                None => {
                    let v = self.emit_node(node, &vals, acc, smemo);
                    memo.insert(key, v);
                    v
                }
            };
            vals.push(v);
        }
        vals[plan.root]
    }

    /// The code of one node in its vector form; `vals` holds the plan's earlier nodes.
    fn emit_node(
        &mut self,
        node: &VNode<'_>,
        vals: &[VV],
        acc: Option<Value>,
        smemo: &mut HashMap<*const Expr, Value>,
    ) -> VV {
        match node.form {
            VForm::Uniform => VV::U(self.eval(node.expr, smemo)),
            VForm::Acc => VV::V(acc.expect("only epilogue plans read the accumulator")),
            VForm::Load {
                buf,
                index,
                ref stride,
            } => {
                let off = self.eval(index, smemo);
                match *stride {
                    Stride::Fixed(1) => {
                        let p = self.addr(buf, off);
                        let fl = self.load_flags(buf, vflags());
                        VV::V(self.b.ins().load(types::F32X4, fl, p, 0))
                    }
                    Stride::Fixed(s) => VV::V(self.lanes(|cx, lane| {
                        let o = cx.b.ins().iadd_imm_s(off, s * lane as i64);
                        cx.load(buf, o)
                    })),
                    Stride::Run(ref s) => {
                        let s = self.eval(s, smemo);
                        let mut o = off;
                        VV::V(self.lanes(|cx, lane| {
                            if lane > 0 {
                                o = cx.b.ins().iadd(o, s);
                            }
                            cx.load(buf, o)
                        }))
                    }
                }
            }
            VForm::Gather { buf, base, at } => {
                let fv = self.vector_of(vals[at], types::F32X4);
                // One vector conversion (the offsets are small and non-negative), then lane
                // by lane.
                let iv = self.b.ins().fcvt_to_sint_sat(types::I32X4, fv);
                let row = base.map(|e| self.eval(e, smemo));
                VV::V(self.lanes(|cx, lane| {
                    let o = cx.gather_offset(iv, lane, row);
                    cx.load(buf, o)
                }))
            }
            VForm::Bytes { buf, signed, index } => {
                let off = self.eval(index, smemo);
                let w = self.four_bytes(buf, off, signed);
                VV::V(self.b.ins().fcvt_from_sint(types::F32X4, w))
            }
            VForm::Bools { buf, index } => {
                // Four bools (bytes 0 or 1), widened to 32-bit lanes: all ones where true.
                let off = self.eval(index, smemo);
                let w = self.four_bytes(buf, off, false);
                let zero = self.b.ins().iconst(types::I32, 0);
                let zero = self.b.ins().splat(types::I32X4, zero);
                VV::V(self.b.ins().icmp(IntCC::NotEqual, w, zero))
            }
            VForm::Words { buf, index, plus } => {
                let off = self.eval(index, smemo);
                let p = self.addr(buf, off);
                let fl = self.load_flags(buf, vflags());
                let mut w = self.b.ins().load(types::I32X4, fl, p, 0);
                if let Some(k) = plus {
                    let v = self.vector_of(vals[k], types::I32X4);
                    w = self.b.ins().iadd(w, v);
                }
                VV::V(self.b.ins().fcvt_from_sint(types::F32X4, w))
            }
            VForm::Unary(op, a) => {
                let x = self.vector_of(vals[a], types::F32X4);
                let (b, fma) = (&mut self.b, self.fma);
                VV::V(match op {
                    VUnary::Neg => b.ins().fneg(x),
                    VUnary::Abs => b.ins().fabs(x),
                    VUnary::Sqrt => b.ins().sqrt(x),
                    VUnary::Floor => b.ins().floor(x),
                    VUnary::Ceil => b.ins().ceil(x),
                    VUnary::Round => b.ins().nearest(x),
                    VUnary::Trunc => b.ins().trunc(x),
                    VUnary::Exp => vmath::exp(b, fma, x),
                    VUnary::Log => vmath::log(b, fma, x),
                    VUnary::Tanh => vmath::tanh(b, fma, x),
                    VUnary::Erf => vmath::erf(b, fma, x),
                    VUnary::Sigmoid => vmath::sigmoid(b, fma, x),
                })
            }
            VForm::PowConst(a, y) => {
                let x = self.vector_of(vals[a], types::F32X4);
                VV::V(vmath::pow_const(&mut self.b, self.fma, x, y))
            }
            VForm::Scale(a, c) => {
                let x = self.vector_of(vals[a], types::F32X4);
                let k = vmath::splat(&mut self.b, c);
                VV::V(self.b.ins().fmul(x, k))
            }
            VForm::Clamp(op, x, c) => {
                let xv = self.vector_of(vals[x], types::F32X4);
                VV::V(self.clamp_insts(op, xv, c))
            }
            VForm::Arith(op, a, b) => {
                let x = self.vector_of(vals[a], types::F32X4);
                let y = self.vector_of(vals[b], types::F32X4);
                let ins = self.b.ins();
                VV::V(match op {
                    VArith::Add => ins.fadd(x, y),
                    VArith::Sub => ins.fsub(x, y),
                    VArith::Mul => ins.fmul(x, y),
                    VArith::Div => ins.fdiv(x, y),
                    VArith::Max => ins.fmax(x, y),
                    VArith::Min => ins.fmin(x, y),
                })
            }
            VForm::Compare(cc, a, b) => {
                let x = self.vector_of(vals[a], types::F32X4);
                let y = self.vector_of(vals[b], types::F32X4);
                VV::V(self.b.ins().fcmp(cc, x, y))
            }
            VForm::Logic(op, a, b) => {
                let x = self.mask_of(vals[a]);
                let y = self.mask_of(vals[b]);
                VV::V(match op {
                    VLogic::And => self.b.ins().band(x, y),
                    VLogic::Or => self.b.ins().bor(x, y),
                })
            }
            VForm::Select(c, a, b) => {
                let x = self.vector_of(vals[a], types::F32X4);
                let y = self.vector_of(vals[b], types::F32X4);
                match vals[c] {
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
        }
    }

    /// A float32x4 of four scalars, each inserted as soon as `lane` computes it.
    /// The element offset of a table read in `lane`: that lane of the converted keys `iv`
    /// (non-negative), plus the table's row when it has one.
    fn gather_offset(&mut self, iv: Value, lane: u8, row: Option<Value>) -> Value {
        let x = self.b.ins().extractlane(iv, lane);
        let o = self.b.ins().uextend(PTR, x);
        match row {
            Some(r) => self.b.ins().iadd(r, o),
            None => o,
        }
    }

    fn lanes(&mut self, mut lane: impl FnMut(&mut Self, u8) -> Value) -> Value {
        let s = lane(self, 0);
        let mut v = self.b.ins().splat(types::F32X4, s);
        for k in 1..4u8 {
            let s = lane(self, k);
            v = self.b.ins().insertlane(v, s, k);
        }
        v
    }
}
