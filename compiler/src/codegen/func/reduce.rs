//! Reductions into registers (`Stmt::Reduce`): a fold of the body over its loops, then the
//! epilogue on the result and one store.
//!
//! Float32 sums, maxima and minima whose body vectorizes along the innermost reduced loop keep
//! four f32x4 accumulators over 16-element steps (one chain would wait on the combine's
//! latency), then one over 4-element steps, then a scalar tail, combined horizontally at the
//! end; every other reduction (other types, products, arg-max/min) is scalar.

use super::vectorize::{self, VFold, VPlan};
use super::{FnCx, clif_ty};
use crate::ir::DType;
use crate::ir::expr::{BinOp, E};
use crate::ir::graph::ReduceKind;
use crate::loops::{BufId, Count};
use cranelift_codegen::ir::{InstBuilder, Value, types};
use cranelift_frontend::Variable;
use std::collections::HashMap;

impl FnCx<'_, '_> {
    pub(super) fn reduce(
        &mut self,
        buf: BufId,
        offset: &E,
        kind: ReduceKind,
        loops: &[(u32, Count)],
        body: &E,
        epilogue: Option<&E>,
    ) {
        // Run-time extents: the scalar fold.
        let fixed: Option<Vec<(u32, i64)>> = loops
            .iter()
            .map(|(v, c)| c.fixed().map(|n| (*v, n)))
            .collect();
        if let Some(fixed) = &fixed
            && let Some((fold, plan)) =
                vectorize::vector_reduction(&self.prog.buffers, kind, fixed, body)
        {
            return self.reduce_vector(buf, offset, fixed, (body, fold, &plan), epilogue);
        }
        let dt = body.dtype;
        let ty = clif_ty(dt);
        let acc = self.b.declare_var(ty);
        let init = self.konst(dt, crate::ir::interp::reduce_init(kind, dt));
        self.b.def_var(acc, init);
        let arg = self.b.declare_var(types::I64);
        let zero = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(arg, zero);
        let first = self.b.declare_var(types::I8);
        let one8 = self.b.ins().iconst(types::I8, 1);
        self.b.def_var(first, one8);
        let is_arg = matches!(kind, ReduceKind::ArgMax { .. } | ReduceKind::ArgMin { .. });
        let arg_var = loops.first().map(|l| l.0).unwrap_or(0);
        self.reduce_loops(loops, &mut |cx| {
            let mut memo = HashMap::new();
            let v = cx.eval(body, &mut memo);
            let a = cx.b.use_var(acc);
            let next = match kind {
                ReduceKind::Sum => cx.binary(BinOp::Add, dt, a, v),
                ReduceKind::Prod => cx.binary(BinOp::Mul, dt, a, v),
                ReduceKind::Max => cx.binary(BinOp::Max, dt, a, v),
                ReduceKind::Min => cx.binary(BinOp::Min, dt, a, v),
                ReduceKind::ArgMax { select_last } | ReduceKind::ArgMin { select_last } => {
                    let max = matches!(kind, ReduceKind::ArgMax { .. });
                    let op = match (max, select_last) {
                        (true, false) => BinOp::Gt,
                        (true, true) => BinOp::Ge,
                        (false, false) => BinOp::Lt,
                        (false, true) => BinOp::Le,
                    };
                    let better = cx.binary(op, dt, v, a);
                    let f = cx.b.use_var(first);
                    let take = cx.b.ins().bor(better, f);
                    let zero8 = cx.b.ins().iconst(types::I8, 0);
                    cx.b.def_var(first, zero8);
                    let rv = cx.var(arg_var);
                    let r = cx.b.use_var(rv);
                    let old = cx.b.use_var(arg);
                    let na = cx.b.ins().select(take, r, old);
                    cx.b.def_var(arg, na);
                    cx.b.ins().select(take, v, a)
                }
            };
            cx.b.def_var(acc, next);
        });
        let result = if is_arg {
            self.b.use_var(arg)
        } else {
            self.b.use_var(acc)
        };
        let rdt = if is_arg { DType::I64 } else { dt };
        let mut memo = HashMap::new();
        let (val, vdt) = match epilogue {
            Some(e) => {
                self.acc = Some(result);
                let v = self.eval(e, &mut memo);
                self.acc = None;
                (v, e.dtype)
            }
            None => (result, rdt),
        };
        let off = self.eval(offset, &mut memo);
        self.store(buf, off, val, vdt);
    }

    /// A float reduction with four lanes along the innermost loop, a scalar tail, and a
    /// horizontal combine at the end.
    fn reduce_vector(
        &mut self,
        buf: BufId,
        offset: &E,
        loops: &[(u32, i64)],
        (body, fold, plan): (&E, VFold, &VPlan<'_>),
        epilogue: Option<&E>,
    ) {
        let combine = |cx: &mut Self, a: Value, b: Value| cx.fold_insts(fold, a, b);
        let init = fold.init();
        // Four vector accumulators along 16-element steps (one chain would wait on the
        // combine's latency every iteration), then one along 4-element steps, then scalars.
        let accs: [Variable; 4] = std::array::from_fn(|_| self.b.declare_var(types::F32X4));
        let acc_v = accs[0];
        let acc_s = self.b.declare_var(types::F32);
        let i = self.b.ins().f32const(init);
        let iv = self.b.ins().splat(types::F32X4, i);
        for a in accs {
            self.b.def_var(a, iv);
        }
        self.b.def_var(acc_s, i);
        let (outer, last) = loops.split_at(loops.len() - 1);
        let (var, extent) = last[0];
        let outer: Vec<(u32, Count)> = outer.iter().map(|&(v, n)| (v, Count::Fixed(n))).collect();
        self.reduce_loops(&outer, &mut |cx| {
            let v = cx.var(var);
            let z = cx.b.ins().iconst(types::I64, 0);
            cx.b.def_var(v, z);
            if extent >= 32 {
                cx.counted_loop(v, z, extent, 16, |cx| {
                    let base = cx.b.use_var(v);
                    for (u, acc) in accs.iter().enumerate() {
                        let at = cx.b.ins().iadd_imm_s(base, 4 * u as i64);
                        cx.b.def_var(v, at);
                        let x = cx.emit_value(plan, &mut HashMap::new());
                        let x = cx.vector_of(x, types::F32X4);
                        let a = cx.b.use_var(*acc);
                        let n = combine(cx, a, x);
                        cx.b.def_var(*acc, n);
                    }
                    cx.b.def_var(v, base);
                });
            }
            let start = cx.b.use_var(v);
            cx.counted_loop(v, start, extent, 4, |cx| {
                let x = cx.emit_value(plan, &mut HashMap::new());
                let x = cx.vector_of(x, types::F32X4);
                let a = cx.b.use_var(acc_v);
                let n = combine(cx, a, x);
                cx.b.def_var(acc_v, n);
            });
            let start = cx.b.use_var(v);
            cx.counted_loop(v, start, extent, 1, |cx| {
                let mut memo = HashMap::new();
                let x = cx.eval(body, &mut memo);
                let a = cx.b.use_var(acc_s);
                let n = combine(cx, a, x);
                cx.b.def_var(acc_s, n);
            });
        });
        let mut av = self.b.use_var(accs[0]);
        for acc in &accs[1..] {
            let o = self.b.use_var(*acc);
            av = combine(self, av, o);
        }
        let mut r = self.b.use_var(acc_s);
        for lane in 0..4u8 {
            let l = self.b.ins().extractlane(av, lane);
            r = combine(self, r, l);
        }
        let mut memo = HashMap::new();
        let (val, vdt) = match epilogue {
            Some(e) => {
                self.acc = Some(r);
                let v = self.eval(e, &mut memo);
                self.acc = None;
                (v, e.dtype)
            }
            None => (r, DType::F32),
        };
        let off = self.eval(offset, &mut memo);
        self.store(buf, off, val, vdt);
    }

    pub(super) fn reduce_loops(&mut self, loops: &[(u32, Count)], body: &mut dyn FnMut(&mut Self)) {
        match loops.split_first() {
            None => body(self),
            Some(((var, extent), rest)) => {
                let v = self.var(*var);
                let z = self.b.ins().iconst(types::I64, 0);
                match extent.fixed() {
                    Some(1) => {
                        self.b.def_var(v, z);
                        self.reduce_loops(rest, body);
                    }
                    Some(n) => {
                        self.counted_loop(v, z, n, 1, |cx| cx.reduce_loops(rest, body));
                    }
                    None => {
                        let end = self.eval_int(&extent.expr());
                        self.counted_loop_to(v, z, end, 1, |cx| cx.reduce_loops(rest, body));
                    }
                }
            }
        }
    }
}
