//! Loop IR function → Cranelift IR: the per-function context and statement lowering.
//!
//! `FnCx` translates one `loops::Func` body: loop nests, stores, block copies, checks and
//! kernel calls live here; the rest is split by what it emits:
//! - `scalar`: expressions one element at a time (every type; libm calls for what has no
//!   instruction) and ONNX Cast conversions;
//! - `reduce`: reductions into registers, scalar or with f32x4 accumulators along the
//!   reduced axis;
//! - `copy`: innermost loops that copy a contiguous run, as one `memmove`;
//! - `vectorize`: which innermost loops run four float32 lanes at a time and the vector
//!   form of each of their expression nodes (one definition: a plan, or scalar code);
//! - `vector`: the f32x4 code of those plans, form by form.
//!
//! Contract: every buffer a body touches has its base pointer computed (`setup_bases`) before
//! any statement of it is lowered; loads of buffers the function does not write are pure.

mod copy;
mod reduce;
mod scalar;
mod vector;
mod vectorize;

use super::Imports;
use crate::ir::DType;
use crate::ir::expr::{E, Expr};
use crate::loops::{Arg, BufId, Loc, Program, Stmt};
use copy::MEMMOVE_MIN;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    self, AbiParam, BlockArg, InstBuilder, MemFlagsData, Type, Value, types,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use std::collections::HashMap;

pub const PTR: Type = types::I64;

/// Longest vector loop unrolled completely (elements).
const SHORT_VECTOR_LOOP: i64 = 16;

/// The Cranelift type a value of `dt` is computed in.
pub fn clif_ty(dt: DType) -> Type {
    match dt {
        DType::F32
        | DType::F16
        | DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1 => types::F32,
        DType::F64 => types::F64,
        DType::I8 | DType::U8 | DType::Bool | DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
            types::I8
        }
        DType::I16 | DType::U16 => types::I16,
        DType::I32 | DType::U32 => types::I32,
        // Strings are pointers the generated code only moves.
        DType::I64 | DType::U64 | DType::Str => types::I64,
    }
}

fn is_unsigned(dt: DType) -> bool {
    dt.is_unsigned_int() || dt == DType::Bool
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Most bytes a `Stmt::Copy` of a constant size moves by loads and stores of its own
/// instead of a `memcpy` call: a concat along a short last axis copies a few elements per
/// step (a detector head's `[.., 2]` parts: a call per 8 bytes took a quarter of the time
/// of the convolution before it).
const INLINE_COPY_BYTES: i64 = 64;

/// Per-function translation state.
pub struct FnCx<'a, 'b> {
    pub b: FunctionBuilder<'b>,
    pub prog: &'a Program,
    pub imports: Imports<'a>,
    pub vars: HashMap<u32, Variable>,
    pub bases: HashMap<BufId, Value>,
    /// Buffers this function writes (stores, reductions, copies, kernel arguments); every
    /// other buffer is read-only for its whole duration.
    written: std::collections::HashSet<BufId>,
    /// Loop-invariant subexpressions computed before the vector loop they are invariant in
    /// (`hoist_uniform`), kept in stack slots that `eval` reads ahead of its memo.
    hoisted: HashMap<*const Expr, (ir::StackSlot, Type)>,
    pub err: Variable,
    pub ws: Value,
    /// The run's `onnxc_threads` pointer (null in a single-threaded run), passed to kernels
    /// that take one.
    pub threads: Value,
    /// The worker running this code (a parallel part's), whose scratch slot kernels get;
    /// None: worker 0.
    pub worker: Option<Value>,
    acc: Option<Value>,
    /// Whether the target has fused multiply-add (for the vector math polynomials).
    pub fma: super::vmath::Fma,
}

impl<'a, 'b> FnCx<'a, 'b> {
    pub fn new(
        b: FunctionBuilder<'b>,
        prog: &'a Program,
        imports: Imports<'a>,
        err: Variable,
        ws: Value,
        threads: Value,
    ) -> Self {
        FnCx {
            b,
            prog,
            imports,
            vars: HashMap::new(),
            bases: HashMap::new(),
            written: Default::default(),
            hoisted: HashMap::new(),
            err,
            ws,
            threads,
            worker: None,
            acc: None,
            fma: super::vmath::Fma(false),
        }
    }

    /// Computes base pointers of every buffer the body touches (in the current block).
    pub fn setup_bases(&mut self, body: &[Stmt], inputs: Value, outputs: Value) {
        self.setup_dims(inputs);
        let mut bufs = Vec::new();
        crate::loops::collect_bufs(body, &mut bufs);
        collect_written(body, &mut self.written);
        bufs.sort();
        bufs.dedup();
        for id in bufs {
            let buf = &self.prog.buffers[id as usize];
            let base = match &buf.loc {
                Loc::Input(k) => {
                    self.b
                        .ins()
                        .load(PTR, flags().with_readonly(), inputs, (*k * 8) as i32)
                }
                Loc::Output(k) => {
                    self.b
                        .ins()
                        .load(PTR, flags().with_readonly(), outputs, (*k * 8) as i32)
                }
                Loc::Arena(o) => self.b.ins().iadd_imm_s(self.ws, *o as i64),
                Loc::Const(_) => {
                    let gv = self.imports.const_gv(id, &mut self.b);
                    self.b.ins().symbol_value(PTR, gv)
                }
            };
            let base = if let Some(e) = &buf.offset_at {
                let off = self.eval_int(e);
                self.b.ins().iadd(base, off)
            } else if buf.offset > 0 {
                self.b.ins().iadd_imm_s(base, buf.offset as i64)
            } else {
                base
            };
            self.bases.insert(id, base);
        }
    }

    pub fn stmts(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn var(&mut self, v: u32) -> Variable {
        if let Some(x) = self.vars.get(&v) {
            return *x;
        }
        let x = self.b.declare_var(types::I64);
        self.vars.insert(v, x);
        x
    }

    /// Emits `for var in start..end step` around `body`.
    fn counted_loop(
        &mut self,
        var: Variable,
        start: Value,
        end: i64,
        step: i64,
        body: impl FnOnce(&mut Self),
    ) {
        let header = self.b.create_block();
        let body_b = self.b.create_block();
        let exit = self.b.create_block();
        self.b.def_var(var, start);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let i = self.b.use_var(var);
        let cond = if step == 1 {
            self.b.ins().icmp_imm_s(IntCC::SignedLessThan, i, end)
        } else {
            let next = self.b.ins().iadd_imm_s(i, step);
            self.b
                .ins()
                .icmp_imm_s(IntCC::SignedLessThanOrEqual, next, end)
        };
        self.b.ins().brif(cond, body_b, &[], exit, &[]);
        self.b.switch_to_block(body_b);
        body(self);
        let i = self.b.use_var(var);
        let next = self.b.ins().iadd_imm_s(i, step);
        self.b.def_var(var, next);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
    }

    /// Emits `for var in start..end step`, `end` a run-time value; with `step` > 1 the loop
    /// stops before passing `end` (the caller handles the rest).
    fn counted_loop_to(
        &mut self,
        var: Variable,
        start: Value,
        end: Value,
        step: i64,
        body: impl FnOnce(&mut Self),
    ) {
        let header = self.b.create_block();
        let body_b = self.b.create_block();
        let exit = self.b.create_block();
        self.b.def_var(var, start);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let i = self.b.use_var(var);
        let next = self.b.ins().iadd_imm_s(i, step);
        let cond = self.b.ins().icmp(IntCC::SignedLessThanOrEqual, next, end);
        self.b.ins().brif(cond, body_b, &[], exit, &[]);
        self.b.switch_to_block(body_b);
        body(self);
        let i = self.b.use_var(var);
        let next = self.b.ins().iadd_imm_s(i, step);
        self.b.def_var(var, next);
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(exit);
    }

    /// Iterations `[begin, end)` of the loop `s` (a `For`, possibly inside loops of one
    /// iteration: `par::parallel_target`), as a chunk of `onnxc_parallel_loop`. Every
    /// element gets the code the whole loop gives it (`stmt`): the same vector body, the
    /// vector tail redone on the chunk's last four iterations (only the last chunk is not a
    /// multiple of four long, and no chunk is shorter than four).
    pub fn stmt_range(&mut self, s: &Stmt, begin: Value, end: Value) {
        let Stmt::For {
            var,
            extent,
            vector,
            body,
        } = s
        else {
            unreachable!("a parallel target is a loop")
        };
        let v = self.var(*var);
        if extent.fixed() == Some(1) {
            let z = self.b.ins().iconst(types::I64, 0);
            self.b.def_var(v, z);
            return self.stmt_range(&body[0], begin, end);
        }
        if *vector
            && extent.max() >= MEMMOVE_MIN
            && let Some(run) = self.contiguous_copy(*var, body)
        {
            let count = self.b.ins().isub(end, begin);
            return self.copy_run_from(v, begin, count, run);
        }
        // A run-time extent may give chunks shorter than four: no vector tail then.
        if *vector
            && extent.fixed().is_some_and(|n| n >= 4)
            && let Some(vl) = vectorize::vector_loop(&self.prog.buffers, *var, body)
        {
            let added = self.hoist_uniform(*var, body);
            self.counted_loop_to(v, begin, end, 4, |cx| cx.vector_body(&vl));
            // A length that is not a multiple of four: the last four again.
            let len = self.b.ins().isub(end, begin);
            let rem = self.b.ins().band_imm_s(len, 3);
            let tail = self.b.create_block();
            let done = self.b.create_block();
            self.b.ins().brif(rem, tail, &[], done, &[]);
            self.b.switch_to_block(tail);
            let last = self.b.ins().iadd_imm_s(end, -4);
            self.b.def_var(v, last);
            self.vector_body(&vl);
            self.b.ins().jump(done, &[]);
            self.b.switch_to_block(done);
            for k in added {
                self.hoisted.remove(&k);
            }
            return;
        }
        // A run-time extent's chunks may be of any length: groups of four, then the rest.
        let groups = *vector && extent.fixed().is_none();
        self.range_loop(v, *var, (begin, end), groups, body);
    }

    /// A loop whose extent is known at run time only (`Count::Dyn`).
    fn dyn_loop(
        &mut self,
        v: Variable,
        var: u32,
        extent: &crate::loops::Count,
        vector: bool,
        body: &[Stmt],
    ) {
        let end = self.eval_int(&extent.expr());
        let z = self.b.ins().iconst(types::I64, 0);
        self.range_loop(v, var, (z, end), vector, body);
    }

    /// Iterations `[begin, end)` of a loop over `body`, the loop-invariant expressions
    /// hoisted: with `groups` (and a body that vectorizes), a vector loop over whole groups
    /// of four and the scalar body for the rest (the range may be shorter than four);
    /// otherwise the scalar loop.
    fn range_loop(
        &mut self,
        v: Variable,
        var: u32,
        (begin, end): (Value, Value),
        groups: bool,
        body: &[Stmt],
    ) {
        let added = self.hoist_uniform(var, body);
        let mut from = begin;
        if groups && let Some(vl) = vectorize::vector_loop(&self.prog.buffers, var, body) {
            self.counted_loop_to(v, begin, end, 4, |cx| cx.vector_body(&vl));
            from = self.b.use_var(v);
        }
        self.counted_loop_to(v, from, end, 1, |cx| cx.stmts(body));
        for k in added {
            self.hoisted.remove(&k);
        }
    }

    /// The value of an i64 expression over the run-time dims (a parallel loop's extent).
    pub fn eval_int(&mut self, e: &E) -> Value {
        self.eval(e, &mut HashMap::new())
    }

    /// Defines the run-time dims' variables (`loops::DIM_VAR`) from the dims array that
    /// follows the input pointers.
    pub fn setup_dims(&mut self, inputs: Value) {
        if self.prog.run_dims.is_empty() {
            return;
        }
        let at = (self.prog.inputs.len() * 8) as i32;
        let dims = self.b.ins().load(PTR, flags().with_readonly(), inputs, at);
        for k in 0..self.prog.run_dims.len() {
            let d = self
                .b
                .ins()
                .load(types::I64, flags().with_readonly(), dims, (k * 8) as i32);
            let var = self.var(crate::loops::DIM_VAR + k as u32);
            self.b.def_var(var, d);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For {
                var,
                extent,
                vector,
                body,
            } => {
                let v = self.var(*var);
                let Some(extent) = extent.fixed() else {
                    return self.dyn_loop(v, *var, extent, *vector, body);
                };
                if extent == 1 {
                    let z = self.b.ins().iconst(types::I64, 0);
                    self.b.def_var(v, z);
                    self.stmts(body);
                    return;
                }
                if *vector
                    && extent >= MEMMOVE_MIN
                    && let Some(run) = self.contiguous_copy(*var, body)
                {
                    self.copy_run(v, extent, run);
                    return;
                }
                if *vector
                    && extent >= 4
                    && let Some(vl) = vectorize::vector_loop(&self.prog.buffers, *var, body)
                {
                    let added = self.hoist_uniform(*var, body);
                    if extent <= SHORT_VECTOR_LOOP && extent % 4 == 0 {
                        // A loop over a blocked layout's 8 lanes: unrolled, so the loads it
                        // indexes by lane alone (per-channel parameters) have constant
                        // offsets and no loop control runs per position.
                        for j in 0..extent / 4 {
                            let at = self.b.ins().iconst(types::I64, 4 * j);
                            self.b.def_var(v, at);
                            self.vector_body(&vl);
                        }
                    } else {
                        let z = self.b.ins().iconst(types::I64, 0);
                        self.counted_loop(v, z, extent, 4, |cx| cx.vector_body(&vl));
                        if extent % 4 != 0 {
                            // The tail reuses the vector body on the last four elements: the
                            // stores are pure (no step reads the buffer it writes), so
                            // rewriting a few outputs with the same values is harmless.
                            let last = self.b.ins().iconst(types::I64, extent - 4);
                            self.b.def_var(v, last);
                            self.vector_body(&vl);
                        }
                    }
                    for k in added {
                        self.hoisted.remove(&k);
                    }
                    return;
                }
                let added = self.hoist_uniform(*var, body);
                let z = self.b.ins().iconst(types::I64, 0);
                self.counted_loop(v, z, extent, 1, |cx| cx.stmts(body));
                for k in added {
                    self.hoisted.remove(&k);
                }
            }
            Stmt::Store { buf, offset, value } => {
                let mut memo = HashMap::new();
                let val = self.eval(value, &mut memo);
                let off = self.eval(offset, &mut memo);
                self.store(*buf, off, val, value.dtype);
            }
            Stmt::Reduce {
                buf,
                offset,
                kind,
                loops,
                body,
                epilogue,
            } => self.reduce(*buf, offset, *kind, loops, body, epilogue.as_ref()),
            Stmt::Copy {
                dst,
                dst_offset,
                src,
                src_offset,
                elems,
            } => {
                let es = self.prog.buffers[*dst as usize].dtype.size() as i64;
                let mut memo = HashMap::new();
                let d = self.eval(dst_offset, &mut memo);
                let s = self.eval(src_offset, &mut memo);
                let dp = self.addr(*dst, d);
                let sp = self.addr(*src, s);
                let size = match elems.fixed() {
                    Some(n) if n * es <= INLINE_COPY_BYTES => {
                        return self.inline_copy(dp, sp, n * es);
                    }
                    Some(n) => self.b.ins().iconst(PTR, n * es),
                    None => {
                        let n = self.eval(&elems.expr(), &mut memo);
                        self.b.ins().imul_imm_s(n, es)
                    }
                };
                let memcpy = self
                    .imports
                    .func(&mut self.b, "memcpy", &[PTR, PTR, PTR], &[PTR]);
                self.b.ins().call(memcpy, &[dp, sp, size]);
            }
            Stmt::Check { cond, code } => {
                let mut memo = HashMap::new();
                let c = self.eval(cond, &mut memo);
                self.flag_error(c, *code);
            }
            Stmt::Call { kernel, args } => {
                let mut memo = HashMap::new();
                let mut vals = Vec::new();
                for a in args {
                    let v = match a {
                        Arg::Ptr { buf, offset } => {
                            let off = self.eval(offset, &mut memo);
                            self.addr(*buf, off)
                        }
                        Arg::Null => self.b.ins().iconst(PTR, 0),
                        Arg::Int(e) => self.eval(e, &mut memo),
                        Arg::Params(p) => {
                            let bytes: Vec<u8> = p.iter().flat_map(|v| v.to_le_bytes()).collect();
                            let gv = self.imports.rodata_gv(bytes, &mut self.b);
                            self.b.ins().symbol_value(PTR, gv)
                        }
                        Arg::DynParams(p) => {
                            // Computed into a stack array for the call.
                            let slot = self.b.create_sized_stack_slot(ir::StackSlotData::new(
                                ir::StackSlotKind::ExplicitSlot,
                                (p.len() * 8) as u32,
                                3,
                            ));
                            for (k, e) in p.iter().enumerate() {
                                let v = self.eval(e, &mut memo);
                                self.b
                                    .ins()
                                    .stack_store(types::I64, v, slot, (k * 8) as i32);
                            }
                            self.b.ins().stack_addr(PTR, slot, 0)
                        }
                        Arg::Floats(p) => {
                            let bytes: Vec<u8> = p.iter().flat_map(|v| v.to_le_bytes()).collect();
                            let gv = self.imports.rodata_gv(bytes, &mut self.b);
                            self.b.ins().symbol_value(PTR, gv)
                        }
                        Arg::Blob(p) => {
                            let bytes: Vec<u8> = p.iter().flat_map(|v| v.to_le_bytes()).collect();
                            let gv = self.imports.rodata_gv(bytes, &mut self.b);
                            self.b.ins().symbol_value(PTR, gv)
                        }
                        Arg::Scratch { offset } => {
                            let base = self.b.ins().iadd_imm_s(self.ws, *offset as i64);
                            match self.worker {
                                None => base,
                                // A parallel loop's calls: the worker's slot.
                                Some(w) => {
                                    let per = self.prog.scratch_per_worker as i64;
                                    let slot = self.b.ins().imul_imm_s(w, per);
                                    let slot = self
                                        .b
                                        .ins()
                                        .iadd_imm_s(slot, self.prog.scratch_shared as i64);
                                    self.b.ins().iadd(base, slot)
                                }
                            }
                        }
                        Arg::Threads => self.threads,
                    };
                    vals.push(v);
                }
                let tys = vec![PTR; vals.len()];
                // A kernel that decodes a parameter blob returns a status (nonzero: it refused
                // the blob and touched nothing). The rest of the step still runs, on whatever
                // the output holds; NAME_run then stops and returns the first error (the
                // outputs' contents are unspecified after an error).
                let rets: &[Type] = if kernel.status { &[types::I32] } else { &[] };
                let f = self.imports.func(&mut self.b, kernel.symbol, &tys, rets);
                let call = self.b.ins().call(f, &vals);
                if kernel.status {
                    let status = self.b.inst_results(call)[0];
                    self.merge_status(status);
                }
            }
        }
    }

    /// Records a kernel's `status` (0: success) as the error code unless one was recorded
    /// before (first error wins): `err = err == 0 ? status : err`, no branch.
    pub fn merge_status(&mut self, status: Value) {
        let prev = self.b.use_var(self.err);
        let clean = self.b.ins().icmp_imm_s(IntCC::Equal, prev, 0);
        let next = self.b.ins().select(clean, status, prev);
        self.b.def_var(self.err, next);
    }

    /// Records error `code` unless `ok` (first error wins); no branch in the hot path.
    fn flag_error(&mut self, ok: Value, code: i32) {
        let prev = self.b.use_var(self.err);
        let clean = self.b.ins().icmp_imm_s(IntCC::Equal, prev, 0);
        let bad = self.b.ins().bxor_imm_s(ok, 1);
        let set = self.b.ins().band(clean, bad);
        let c = self.b.ins().iconst(types::I32, code as i64);
        let next = self.b.ins().select(set, c, prev);
        self.b.def_var(self.err, next);
    }

    fn addr(&mut self, buf: BufId, off: Value) -> Value {
        let es = self.prog.buffers[buf as usize].dtype.size() as i64;
        let base = self.bases[&buf];
        let bytes = if es == 1 {
            off
        } else {
            self.b.ins().imul_imm_s(off, es)
        };
        self.b.ins().iadd(base, bytes)
    }

    /// Copies `bytes` (at most `INLINE_COPY_BYTES`) from `src` to `dst`, which do not
    /// overlap: 16-byte loads and stores, then one each of 8, 4, 2 and 1 bytes as the rest
    /// needs, so exactly `bytes` are read and written.
    fn inline_copy(&mut self, dst: Value, src: Value, bytes: i64) {
        let mut at = 0;
        let part = |cx: &mut Self, ty: Type, at: i64| {
            let v = cx.b.ins().load(ty, vflags(), src, at as i32);
            cx.b.ins().store(vflags(), v, dst, at as i32);
        };
        while bytes - at >= 16 {
            part(self, types::I8X16, at);
            at += 16;
        }
        for (ty, w) in [
            (types::I64, 8),
            (types::I32, 4),
            (types::I16, 2),
            (types::I8, 1),
        ] {
            if bytes - at >= w {
                part(self, ty, at);
                at += w;
            }
        }
        debug_assert_eq!(at, bytes);
    }

    /// `base` for a load from `buf`, marked readonly and movable (pure) when this function
    /// does not write `buf`.
    fn load_flags(&self, buf: BufId, base: MemFlagsData) -> MemFlagsData {
        if self.written.contains(&buf) {
            base
        } else {
            base.with_readonly().with_can_move()
        }
    }

    fn load(&mut self, buf: BufId, off: Value) -> Value {
        let dt = self.prog.buffers[buf as usize].dtype;
        if self.prog.buffers[buf as usize].len == 0 {
            // No element: the load runs only where a `CheckIndex` of bound 0 has already
            // failed the run (`ir::expr`'s invariant), and its address may be null (an empty
            // input). Its value is never used; no memory is touched.
            return self.konst(dt, crate::ir::Scalar::zero(dt));
        }
        let p = self.addr(buf, off);
        // A buffer this function does not write holds the same values throughout it
        // (memory planning keeps every value a step reads apart from what it writes), and
        // every load offset is in bounds for all loop variable values (`ir::expr`): the load
        // is pure, so Cranelift may share it and hoist it out of loops it does not vary in
        // (per-row statistics of a normalization, per-channel parameters).
        let fl = self.load_flags(buf, flags());
        match dt {
            DType::F16 => {
                let bits = self.b.ins().load(types::I16, fl, p, 0);
                let f = self.imports.func(
                    &mut self.b,
                    "onnxc_f16_to_f32",
                    &[types::I16],
                    &[types::F32],
                );
                let c = self.b.ins().call(f, &[bits]);
                self.b.inst_results(c)[0]
            }
            DType::BF16 => {
                let bits = self.b.ins().load(types::I16, fl, p, 0);
                let w = self.b.ins().uextend(types::I32, bits);
                let s = self.b.ins().ishl_imm_s(w, 16);
                self.b.ins().bitcast(types::F32, MemFlagsData::new(), s)
            }
            dt if dt.is_lowp_float() => {
                let bits = self.b.ins().uload8(types::I32, fl, p, 0);
                let fmt = self.b.ins().iconst(types::I32, dt.onnx_code() as i64);
                let f = self.imports.func(
                    &mut self.b,
                    "onnxc_lowp_to_f32",
                    &[types::I32, types::I32],
                    &[types::F32],
                );
                let c = self.b.ins().call(f, &[bits, fmt]);
                self.b.inst_results(c)[0]
            }
            _ => self.b.ins().load(clif_ty(dt), fl, p, 0),
        }
    }

    fn store(&mut self, buf: BufId, off: Value, val: Value, val_dt: DType) {
        let dt = self.prog.buffers[buf as usize].dtype;
        let val = if val_dt.compute_type() != dt.compute_type() || (val_dt != dt && dt.is_narrow())
        {
            self.convert(val, val_dt, dt)
        } else {
            val
        };
        let p = self.addr(buf, off);
        match dt {
            DType::F16 => {
                let f = self.imports.func(
                    &mut self.b,
                    "onnxc_f32_to_f16",
                    &[types::F32],
                    &[types::I16],
                );
                let c = self.b.ins().call(f, &[val]);
                let bits = self.b.inst_results(c)[0];
                self.b.ins().store(flags(), bits, p, 0);
            }
            DType::BF16 => {
                let bits = self.f32_to_bf16_bits(val);
                self.b.ins().store(flags(), bits, p, 0);
            }
            dt if dt.is_lowp_float() => {
                // `val` is already rounded to the format (`convert`): the encoding is exact.
                let fmt = self.b.ins().iconst(types::I32, dt.onnx_code() as i64);
                let f = self.imports.func(
                    &mut self.b,
                    "onnxc_lowp_from_f32",
                    &[types::F32, types::I32],
                    &[types::I32],
                );
                let c = self.b.ins().call(f, &[val, fmt]);
                let bits = self.b.inst_results(c)[0];
                self.b.ins().istore8(flags(), bits, p, 0);
            }
            _ => {
                self.b.ins().store(flags(), val, p, 0);
            }
        }
    }
}

/// Buffers a body writes: stored to, reduced into, copied to, or passed to a kernel.
fn collect_written(body: &[Stmt], out: &mut std::collections::HashSet<BufId>) {
    for s in body {
        match s {
            Stmt::For { body, .. } => collect_written(body, out),
            Stmt::Store { buf, .. } | Stmt::Reduce { buf, .. } => {
                out.insert(*buf);
            }
            Stmt::Copy { dst, .. } => {
                out.insert(*dst);
            }
            Stmt::Call { args, .. } => {
                for a in args {
                    if let Arg::Ptr { buf, .. } = a {
                        out.insert(*buf);
                    }
                }
            }
            Stmt::Check { .. } => {}
        }
    }
}

/// `int step(inputs, outputs, workspace, threads)`: a step, and the steps' runner.
pub fn step_signature(call_conv: cranelift_codegen::isa::CallConv) -> ir::Signature {
    let mut sig = ir::Signature::new(call_conv);
    sig.params.extend([AbiParam::new(PTR); 4]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

/// `int part(ctx, begin, end, threads, worker)`: iterations `[begin, end)` of a step's
/// parallel loop (`onnxc_runtime::par::LoopFn`), `ctx` pointing to the step's inputs,
/// outputs and workspace pointers.
pub fn part_signature(call_conv: cranelift_codegen::isa::CallConv) -> ir::Signature {
    let mut sig = ir::Signature::new(call_conv);
    sig.params.extend([
        AbiParam::new(PTR),
        AbiParam::new(types::I64),
        AbiParam::new(types::I64),
        AbiParam::new(PTR),
        AbiParam::new(PTR),
    ]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

pub fn block_args(vals: &[Value]) -> Vec<BlockArg> {
    vals.iter().map(|v| BlockArg::Value(*v)).collect()
}
