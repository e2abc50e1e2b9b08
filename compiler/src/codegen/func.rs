//! Loop IR function → Cranelift IR. Scalar code for everything; innermost loops of f32
//! stores whose loads are contiguous or uniform run four lanes at a time.

use super::Imports;
use crate::ir::expr::{BinOp, E, Expr, ExprKind, UnOp, depends_on, linear_coeff};
use crate::ir::graph::ReduceKind;
use crate::ir::{DType, Scalar};
use crate::loops::{Arg, BufId, Loc, Program, Stmt};
use crate::schedule::EPILOGUE_ACC;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, AbiParam, BlockArg, InstBuilder, MemFlagsData, Type, Value, types,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use std::collections::HashMap;
use std::sync::Arc;

pub const PTR: Type = types::I64;

/// Longest vector loop unrolled completely (elements).
const SHORT_VECTOR_LOOP: i64 = 16;
/// Shortest contiguous copy (elements) lowered to a `memmove` call rather than a vector loop.
const MEMMOVE_MIN: i64 = 16;

/// A loop body copying a contiguous run (`FnCx::contiguous_copy`): destination and source
/// buffers with their element offsets, affine in the loop variables.
#[derive(Copy, Clone)]
struct CopyRun<'s> {
    dst: BufId,
    dst_off: &'s E,
    src: BufId,
    src_off: &'s E,
}

/// The Cranelift type a value of `dt` is computed in.
pub fn clif_ty(dt: DType) -> Type {
    match dt {
        DType::F32 | DType::F16 | DType::BF16 => types::F32,
        DType::F64 => types::F64,
        DType::I8 | DType::U8 | DType::Bool => types::I8,
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
    acc: Option<Value>,
    /// The vector accumulator an epilogue reads in vector mode.
    vacc: Option<Value>,
    /// Whether the target has fused multiply-add (for the vector math polynomials).
    pub fma: super::vmath::Fma,
}

/// A value in vector mode: the same in all lanes, or one per lane.
#[derive(Copy, Clone)]
enum VV {
    U(Value),
    V(Value),
}

impl<'a, 'b> FnCx<'a, 'b> {
    pub fn new(
        b: FunctionBuilder<'b>,
        prog: &'a Program,
        imports: Imports<'a>,
        err: Variable,
        ws: Value,
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
            acc: None,
            vacc: None,
            fma: super::vmath::Fma(false),
        }
    }

    /// Computes base pointers of every buffer the body touches (in the current block).
    pub fn setup_bases(&mut self, body: &[Stmt], inputs: Value, outputs: Value) {
        let mut bufs = Vec::new();
        collect_bufs(body, &mut bufs);
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
            let base = if buf.offset > 0 {
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

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::For {
                var,
                extent,
                vector,
                body,
            } => {
                let v = self.var(*var);
                if *extent == 1 {
                    let z = self.b.ins().iconst(types::I64, 0);
                    self.b.def_var(v, z);
                    self.stmts(body);
                    return;
                }
                if *vector
                    && *extent >= MEMMOVE_MIN
                    && let Some(run) = self.contiguous_copy(*var, body)
                {
                    self.copy_run(v, *extent, run);
                    return;
                }
                if *vector && *extent >= 4 && self.vectorizable(*var, body) {
                    let added = self.hoist_uniform(*var, body);
                    if *extent <= SHORT_VECTOR_LOOP && extent % 4 == 0 {
                        // A loop over a blocked layout's 8 lanes: unrolled, so the loads it
                        // indexes by lane alone (per-channel parameters) have constant
                        // offsets and no loop control runs per position.
                        for j in 0..extent / 4 {
                            let at = self.b.ins().iconst(types::I64, 4 * j);
                            self.b.def_var(v, at);
                            self.vector_body(*var, body);
                        }
                    } else {
                        let z = self.b.ins().iconst(types::I64, 0);
                        self.counted_loop(v, z, *extent, 4, |cx| cx.vector_body(*var, body));
                        if extent % 4 != 0 {
                            // The tail reuses the vector body on the last four elements: the
                            // stores are pure (no step reads the buffer it writes), so
                            // rewriting a few outputs with the same values is harmless.
                            let last = self.b.ins().iconst(types::I64, extent - 4);
                            self.b.def_var(v, last);
                            self.vector_body(*var, body);
                        }
                    }
                    for k in added {
                        self.hoisted.remove(&k);
                    }
                    return;
                }
                let z = self.b.ins().iconst(types::I64, 0);
                self.counted_loop(v, z, *extent, 1, |cx| cx.stmts(body));
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
                let size = self.b.ins().iconst(PTR, elems * es);
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
                        Arg::Scratch { offset } => self.b.ins().iadd_imm_s(self.ws, *offset as i64),
                    };
                    vals.push(v);
                }
                let tys = vec![PTR; vals.len()];
                let f = self.imports.func(&mut self.b, kernel.symbol(), &tys, &[]);
                self.b.ins().call(f, &vals);
            }
        }
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
            _ => self.b.ins().load(clif_ty(dt), fl, p, 0),
        }
    }

    fn store(&mut self, buf: BufId, off: Value, val: Value, val_dt: DType) {
        let dt = self.prog.buffers[buf as usize].dtype;
        let val = if val_dt.compute_type() != dt.compute_type()
            || (val_dt != dt && matches!(dt, DType::F16 | DType::BF16))
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
            _ => {
                self.b.ins().store(flags(), val, p, 0);
            }
        }
    }

    /// Round-to-nearest-even f32 → bf16 bits (NaN stays a quiet NaN).
    fn f32_to_bf16_bits(&mut self, v: Value) -> Value {
        let bits = self.b.ins().bitcast(types::I32, MemFlagsData::new(), v);
        let lsb = self.b.ins().ushr_imm_s(bits, 16);
        let lsb = self.b.ins().band_imm_s(lsb, 1);
        let bias = self.b.ins().iadd_imm_s(lsb, 0x7FFF);
        let rounded = self.b.ins().iadd(bits, bias);
        let r = self.b.ins().ushr_imm_s(rounded, 16);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, v, v);
        let qnan = self.b.ins().iconst(types::I32, 0x7FC0);
        let r = self.b.ins().select(nan, qnan, r);
        self.b.ins().ireduce(types::I16, r)
    }

    fn konst(&mut self, dt: DType, c: Scalar) -> Value {
        match clif_ty(dt) {
            types::F32 => self.b.ins().f32const(c.as_f64() as f32),
            types::F64 => self.b.ins().f64const(c.as_f64()),
            t => {
                let v = if is_unsigned(dt) {
                    c.as_u64() as i64
                } else {
                    c.as_i64()
                };
                let bits = t.bits();
                let v = if bits < 64 {
                    v & ((1i64 << bits) - 1)
                } else {
                    v
                };
                self.b.ins().iconst(t, v)
            }
        }
    }

    fn call1(&mut self, name: &str, ty: Type, args: &[Value]) -> Value {
        let params = vec![ty; args.len()];
        let f = self.imports.func(&mut self.b, name, &params, &[ty]);
        let c = self.b.ins().call(f, args);
        self.b.inst_results(c)[0]
    }

    /// Scalar evaluation, memoized per statement.
    fn eval(&mut self, e: &E, memo: &mut HashMap<*const Expr, Value>) -> Value {
        let key = Arc::as_ptr(e);
        if let Some(v) = memo.get(&key) {
            return *v;
        }
        if let Some(&(slot, ty)) = self.hoisted.get(&key) {
            let v = self.b.ins().stack_load(PTR, ty, slot, 0);
            memo.insert(key, v);
            return v;
        }
        let v = match &e.kind {
            ExprKind::Var(v) => {
                let var = self.var(*v);
                self.b.use_var(var)
            }
            ExprKind::Const(c) => self.konst(e.dtype, *c),
            ExprKind::Load { input, index } => {
                if *input == EPILOGUE_ACC {
                    self.acc.expect("epilogue accumulator is set")
                } else {
                    let off = self.eval(&index[0], memo);
                    self.load(*input, off)
                }
            }
            ExprKind::Unary(op, a) => {
                let x = self.eval(a, memo);
                self.unary(*op, a.dtype, x)
            }
            ExprKind::Binary(op @ (BinOp::Max | BinOp::Min), a, b)
                if clamp_const(*op, a, b).is_some() =>
            {
                // A clamp against a constant: one minss/maxsd (`clamp_insts`).
                let (x, c) = clamp_const(*op, a, b).expect("matched");
                let xv = self.eval(x, memo);
                self.clamp_insts(*op, xv, c)
            }
            ExprKind::Binary(op, a, b) => {
                let x = self.eval(a, memo);
                let y = self.eval(b, memo);
                self.binary(*op, a.dtype, x, y)
            }
            ExprKind::Select(c, a, b) => {
                let c = self.eval(c, memo);
                let x = self.eval(a, memo);
                let y = self.eval(b, memo);
                self.b.ins().select(c, x, y)
            }
            ExprKind::Cast(a) => {
                let x = self.eval(a, memo);
                self.convert(x, a.dtype, e.dtype)
            }
            ExprKind::CheckIndex { index, bound } => {
                let x = self.eval(index, memo);
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                let wrapped = self.b.ins().iadd_imm_s(x, *bound);
                let y = self.b.ins().select(neg, wrapped, x);
                let ok = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, *bound);
                self.flag_error(ok, onnxc_runtime::abi::ONNXC_ERR_INDEX);
                let zero = self.b.ins().iconst(types::I64, 0);
                self.b.ins().select(ok, y, zero)
            }
        };
        memo.insert(key, v);
        v
    }

    fn unary(&mut self, op: UnOp, dt: DType, x: Value) -> Value {
        let ty = clif_ty(dt);
        if dt.is_float() {
            let f64m = ty == types::F64;
            let lib = |n: &str| if f64m { n.to_string() } else { format!("{n}f") };
            return match op {
                UnOp::Neg => self.b.ins().fneg(x),
                UnOp::Abs => self.b.ins().fabs(x),
                UnOp::Sqrt => self.b.ins().sqrt(x),
                UnOp::Floor => self.b.ins().floor(x),
                UnOp::Ceil => self.b.ins().ceil(x),
                UnOp::Round => self.b.ins().nearest(x),
                UnOp::Trunc => self.b.ins().trunc(x),
                UnOp::Exp => self.call1(&lib("exp"), ty, &[x]),
                UnOp::Log => self.call1(&lib("log"), ty, &[x]),
                UnOp::Sin => self.call1(&lib("sin"), ty, &[x]),
                UnOp::Cos => self.call1(&lib("cos"), ty, &[x]),
                UnOp::Tan => self.call1(&lib("tan"), ty, &[x]),
                UnOp::Asin => self.call1(&lib("asin"), ty, &[x]),
                UnOp::Acos => self.call1(&lib("acos"), ty, &[x]),
                UnOp::Atan => self.call1(&lib("atan"), ty, &[x]),
                UnOp::Sinh => self.call1(&lib("sinh"), ty, &[x]),
                UnOp::Cosh => self.call1(&lib("cosh"), ty, &[x]),
                UnOp::Tanh => self.call1(&lib("tanh"), ty, &[x]),
                UnOp::Asinh => self.call1(&lib("asinh"), ty, &[x]),
                UnOp::Acosh => self.call1(&lib("acosh"), ty, &[x]),
                UnOp::Atanh => self.call1(&lib("atanh"), ty, &[x]),
                UnOp::Erf => self.call1(&lib("erf"), ty, &[x]),
                UnOp::Sigmoid => {
                    let n = self.b.ins().fneg(x);
                    let e = self.call1(&lib("exp"), ty, &[n]);
                    let one = if f64m {
                        self.b.ins().f64const(1.0)
                    } else {
                        self.b.ins().f32const(1.0)
                    };
                    let d = self.b.ins().fadd(one, e);
                    self.b.ins().fdiv(one, d)
                }
                UnOp::Sign => {
                    let zero = if f64m {
                        self.b.ins().f64const(0.0)
                    } else {
                        self.b.ins().f32const(0.0)
                    };
                    let one = if f64m {
                        self.b.ins().f64const(1.0)
                    } else {
                        self.b.ins().f32const(1.0)
                    };
                    let m1 = if f64m {
                        self.b.ins().f64const(-1.0)
                    } else {
                        self.b.ins().f32const(-1.0)
                    };
                    let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                    let lt = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
                    let z = self.b.ins().select(lt, m1, zero);
                    let z = self.b.ins().select(gt, one, z);
                    let nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
                    self.b.ins().select(nan, x, z)
                }
                UnOp::IsNan => self.b.ins().fcmp(FloatCC::Unordered, x, x),
                UnOp::IsPosInf | UnOp::IsNegInf => {
                    let inf = if op == UnOp::IsPosInf {
                        f64::INFINITY
                    } else {
                        f64::NEG_INFINITY
                    };
                    let c = if f64m {
                        self.b.ins().f64const(inf)
                    } else {
                        self.b.ins().f32const(inf as f32)
                    };
                    self.b.ins().fcmp(FloatCC::Equal, x, c)
                }
                UnOp::Not | UnOp::BitNot => x,
            };
        }
        if dt == DType::Bool {
            return match op {
                UnOp::Not => self.b.ins().bxor_imm_s(x, 1),
                _ => x,
            };
        }
        let signed = dt.is_signed_int();
        match op {
            UnOp::Neg => self.b.ins().ineg(x),
            UnOp::Abs => {
                if signed {
                    self.b.ins().iabs(x)
                } else {
                    x
                }
            }
            UnOp::Sign => {
                let zero = self.b.ins().iconst(ty, 0);
                let one = self.b.ins().iconst(ty, 1);
                let gt = self.b.ins().icmp_imm_s(
                    if signed {
                        IntCC::SignedGreaterThan
                    } else {
                        IntCC::UnsignedGreaterThan
                    },
                    x,
                    0,
                );
                let base = if signed {
                    let m1 = self.b.ins().iconst(ty, -1);
                    let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                    self.b.ins().select(lt, m1, zero)
                } else {
                    zero
                };
                self.b.ins().select(gt, one, base)
            }
            UnOp::BitNot => self.b.ins().bnot(x),
            UnOp::IsNan | UnOp::IsPosInf | UnOp::IsNegInf => self.b.ins().iconst(types::I8, 0),
            _ => x,
        }
    }

    fn binary(&mut self, op: BinOp, dt: DType, x: Value, y: Value) -> Value {
        let ty = clif_ty(dt);
        if dt.is_float() {
            let f64m = ty == types::F64;
            let lib = |n: &str| if f64m { n.to_string() } else { format!("{n}f") };
            return match op {
                BinOp::Add => self.b.ins().fadd(x, y),
                BinOp::Sub => self.b.ins().fsub(x, y),
                BinOp::Mul => self.b.ins().fmul(x, y),
                BinOp::Div => self.b.ins().fdiv(x, y),
                BinOp::Max => self.b.ins().fmax(x, y),
                BinOp::Min => self.b.ins().fmin(x, y),
                BinOp::Pow => self.call1(&lib("pow"), ty, &[x, y]),
                BinOp::Rem => self.call1(&lib("fmod"), ty, &[x, y]),
                BinOp::FloorMod => {
                    let r = self.call1(&lib("fmod"), ty, &[x, y]);
                    let zero = if f64m {
                        self.b.ins().f64const(0.0)
                    } else {
                        self.b.ins().f32const(0.0)
                    };
                    let nz = self.b.ins().fcmp(FloatCC::NotEqual, r, zero);
                    let rn = self.b.ins().fcmp(FloatCC::LessThan, r, zero);
                    let yn = self.b.ins().fcmp(FloatCC::LessThan, y, zero);
                    let diff = self.b.ins().bxor(rn, yn);
                    let fix = self.b.ins().band(nz, diff);
                    let ry = self.b.ins().fadd(r, y);
                    self.b.ins().select(fix, ry, r)
                }
                BinOp::Eq => self.b.ins().fcmp(FloatCC::Equal, x, y),
                BinOp::Lt => self.b.ins().fcmp(FloatCC::LessThan, x, y),
                BinOp::Le => self.b.ins().fcmp(FloatCC::LessThanOrEqual, x, y),
                BinOp::Gt => self.b.ins().fcmp(FloatCC::GreaterThan, x, y),
                BinOp::Ge => self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, y),
                BinOp::And
                | BinOp::Or
                | BinOp::Xor
                | BinOp::BitAnd
                | BinOp::BitOr
                | BinOp::BitXor
                | BinOp::Shl
                | BinOp::Shr => {
                    if f64m {
                        self.b.ins().f64const(f64::NAN)
                    } else {
                        self.b.ins().f32const(f32::NAN)
                    }
                }
            };
        }
        let unsigned = is_unsigned(dt);
        let cc = |s: IntCC, u: IntCC| if unsigned { u } else { s };
        match op {
            BinOp::Add => self.b.ins().iadd(x, y),
            BinOp::Sub => self.b.ins().isub(x, y),
            BinOp::Mul => self.b.ins().imul(x, y),
            BinOp::Div | BinOp::Rem | BinOp::FloorMod => self.int_div(op, dt, x, y),
            BinOp::Pow => {
                let (x64, y64) = if ty == types::I64 {
                    (x, y)
                } else if unsigned {
                    (
                        self.b.ins().uextend(types::I64, x),
                        self.b.ins().uextend(types::I64, y),
                    )
                } else {
                    (
                        self.b.ins().sextend(types::I64, x),
                        self.b.ins().sextend(types::I64, y),
                    )
                };
                let r = self.call1("onnxc_ipow", types::I64, &[x64, y64]);
                if ty == types::I64 {
                    r
                } else {
                    self.b.ins().ireduce(ty, r)
                }
            }
            BinOp::Max => {
                if unsigned {
                    self.b.ins().umax(x, y)
                } else {
                    self.b.ins().smax(x, y)
                }
            }
            BinOp::Min => {
                if unsigned {
                    self.b.ins().umin(x, y)
                } else {
                    self.b.ins().smin(x, y)
                }
            }
            BinOp::And | BinOp::BitAnd => self.b.ins().band(x, y),
            BinOp::Or | BinOp::BitOr => self.b.ins().bor(x, y),
            BinOp::Xor | BinOp::BitXor => self.b.ins().bxor(x, y),
            BinOp::Shl | BinOp::Shr => {
                let bits = ty.bits() as i64;
                let big = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, y, bits);
                let r = match (op, unsigned) {
                    (BinOp::Shl, _) => self.b.ins().ishl(x, y),
                    (_, true) => self.b.ins().ushr(x, y),
                    (_, false) => self.b.ins().sshr(x, y),
                };
                let sat = if op == BinOp::Shr && !unsigned {
                    self.b.ins().sshr_imm_s(x, bits - 1)
                } else {
                    self.b.ins().iconst(ty, 0)
                };
                self.b.ins().select(big, sat, r)
            }
            BinOp::Eq => self.b.ins().icmp(IntCC::Equal, x, y),
            BinOp::Lt => {
                self.b
                    .ins()
                    .icmp(cc(IntCC::SignedLessThan, IntCC::UnsignedLessThan), x, y)
            }
            BinOp::Le => self.b.ins().icmp(
                cc(IntCC::SignedLessThanOrEqual, IntCC::UnsignedLessThanOrEqual),
                x,
                y,
            ),
            BinOp::Gt => self.b.ins().icmp(
                cc(IntCC::SignedGreaterThan, IntCC::UnsignedGreaterThan),
                x,
                y,
            ),
            BinOp::Ge => self.b.ins().icmp(
                cc(
                    IntCC::SignedGreaterThanOrEqual,
                    IntCC::UnsignedGreaterThanOrEqual,
                ),
                x,
                y,
            ),
        }
    }

    /// Integer division/remainder that never traps: divisor 0 gives 0, MIN / -1 wraps.
    fn int_div(&mut self, op: BinOp, dt: DType, x: Value, y: Value) -> Value {
        let ty = clif_ty(dt);
        let unsigned = is_unsigned(dt);
        let zero = self.b.ins().iconst(ty, 0);
        let one = self.b.ins().iconst(ty, 1);
        let y_zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        if unsigned {
            let safe = self.b.ins().select(y_zero, one, y);
            let r = if op == BinOp::Div {
                self.b.ins().udiv(x, safe)
            } else {
                self.b.ins().urem(x, safe)
            };
            return self.b.ins().select(y_zero, zero, r);
        }
        let y_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let bad = self.b.ins().bor(y_zero, y_m1);
        let safe = self.b.ins().select(bad, one, y);
        let r = match op {
            BinOp::Div => {
                let q = self.b.ins().sdiv(x, safe);
                let neg = self.b.ins().ineg(x);
                let q = self.b.ins().select(y_m1, neg, q);
                self.b.ins().select(y_zero, zero, q)
            }
            _ => {
                let r = self.b.ins().srem(x, safe);
                let r = self.b.ins().select(bad, zero, r);
                if op == BinOp::FloorMod {
                    let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
                    let rn = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r, 0);
                    let yn = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, y, 0);
                    let diff = self.b.ins().bxor(rn, yn);
                    let fix = self.b.ins().band(nz, diff);
                    let ry = self.b.ins().iadd(r, y);
                    self.b.ins().select(fix, ry, r)
                } else {
                    r
                }
            }
        };
        r
    }

    /// Converts a computed value between element types with ONNX Cast semantics.
    pub fn convert(&mut self, x: Value, from: DType, to: DType) -> Value {
        if from == to {
            return x;
        }
        let (ft, tt) = (clif_ty(from), clif_ty(to));
        if to == DType::Bool {
            return if from.is_float() {
                let z = if ft == types::F64 {
                    self.b.ins().f64const(0.0)
                } else {
                    self.b.ins().f32const(0.0)
                };
                self.b.ins().fcmp(FloatCC::NotEqual, x, z)
            } else {
                self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
            };
        }
        if to.is_float() {
            let v = if from.is_float() {
                match (ft, tt) {
                    (a, b) if a == b => x,
                    (types::F32, types::F64) => self.b.ins().fpromote(types::F64, x),
                    _ => self.b.ins().fdemote(types::F32, x),
                }
            } else if is_unsigned(from) {
                self.b.ins().fcvt_from_uint(tt, x)
            } else {
                self.b.ins().fcvt_from_sint(tt, x)
            };
            // Narrow float types round to their precision.
            return match to {
                DType::F16 => {
                    let bits = if from == DType::F64 {
                        self.call1_typed("onnxc_f64_to_f16", &[types::F64], types::I16, &[x])
                    } else {
                        self.call1_typed("onnxc_f32_to_f16", &[types::F32], types::I16, &[v])
                    };
                    self.call1_typed("onnxc_f16_to_f32", &[types::I16], types::F32, &[bits])
                }
                DType::BF16 => {
                    let bits = if from == DType::F64 {
                        self.call1_typed("onnxc_f64_to_bf16", &[types::F64], types::I16, &[x])
                    } else {
                        self.f32_to_bf16_bits(v)
                    };
                    let w = self.b.ins().uextend(types::I32, bits);
                    let s = self.b.ins().ishl_imm_s(w, 16);
                    self.b.ins().bitcast(types::F32, MemFlagsData::new(), s)
                }
                _ => v,
            };
        }
        // To an integer type.
        if from.is_float() {
            let s = self.b.ins().fcvt_to_sint_sat(types::I64, x);
            let v = if to == DType::U64 {
                let u = self.b.ins().fcvt_to_uint_sat(types::I64, x);
                let z = if ft == types::F64 {
                    self.b.ins().f64const(0.0)
                } else {
                    self.b.ins().f32const(0.0)
                };
                let neg = self.b.ins().fcmp(FloatCC::LessThan, x, z);
                self.b.ins().select(neg, s, u)
            } else {
                s
            };
            return if tt == types::I64 {
                v
            } else {
                self.b.ins().ireduce(tt, v)
            };
        }
        let (fb, tb) = (ft.bits(), tt.bits());
        if fb == tb {
            x
        } else if fb > tb {
            self.b.ins().ireduce(tt, x)
        } else if is_unsigned(from) {
            self.b.ins().uextend(tt, x)
        } else {
            self.b.ins().sextend(tt, x)
        }
    }

    fn call1_typed(&mut self, name: &str, params: &[Type], ret: Type, args: &[Value]) -> Value {
        let f = self.imports.func(&mut self.b, name, params, &[ret]);
        let c = self.b.ins().call(f, args);
        self.b.inst_results(c)[0]
    }

    /// Whether a reduction can keep f32x4 accumulators along its innermost loop.
    fn reduce_vectorizable(&self, kind: ReduceKind, loops: &[(u32, i64)], body: &E) -> bool {
        let Some(&(var, extent)) = loops.last() else {
            return false;
        };
        body.dtype == DType::F32
            && extent >= 8
            && matches!(kind, ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min)
            && self.vec_ok(body, var)
    }

    fn reduce(
        &mut self,
        buf: BufId,
        offset: &E,
        kind: ReduceKind,
        loops: &[(u32, i64)],
        body: &E,
        epilogue: Option<&E>,
    ) {
        if self.reduce_vectorizable(kind, loops, body) {
            return self.reduce_vector(buf, offset, kind, loops, body, epilogue);
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
        self.reduce_loops(outer, &mut |cx| {
            let v = cx.var(var);
            let z = cx.b.ins().iconst(types::I64, 0);
            cx.b.def_var(v, z);
            if extent >= 32 {
                cx.counted_loop(v, z, extent, 16, |cx| {
                    let base = cx.b.use_var(v);
                    for (u, acc) in accs.iter().enumerate() {
                        let at = cx.b.ins().iadd_imm_s(base, 4 * u as i64);
                        cx.b.def_var(v, at);
                        let mut memo = HashMap::new();
                        let mut smemo = HashMap::new();
                        let x = cx.veval(body, var, &mut memo, &mut smemo);
                        let x = cx.to_vec(x, types::F32X4);
                        let a = cx.b.use_var(*acc);
                        let n = combine(cx, a, x);
                        cx.b.def_var(*acc, n);
                    }
                    cx.b.def_var(v, base);
                });
            }
            let start = cx.b.use_var(v);
            cx.counted_loop(v, start, extent, 4, |cx| {
                let mut memo = HashMap::new();
                let mut smemo = HashMap::new();
                let x = cx.veval(body, var, &mut memo, &mut smemo);
                let x = cx.to_vec(x, types::F32X4);
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

    fn reduce_loops(&mut self, loops: &[(u32, i64)], body: &mut dyn FnMut(&mut Self)) {
        match loops.split_first() {
            None => body(self),
            Some((&(var, extent), rest)) => {
                let v = self.var(var);
                if extent == 1 {
                    let z = self.b.ins().iconst(types::I64, 0);
                    self.b.def_var(v, z);
                    self.reduce_loops(rest, body);
                    return;
                }
                let z = self.b.ins().iconst(types::I64, 0);
                self.counted_loop(v, z, extent, 1, |cx| cx.reduce_loops(rest, body));
            }
        }
    }

    // ---- contiguous copies ----------------------------------------------------------------

    /// Whether `body` copies a contiguous run along `var`: a single store of a same-type load,
    /// both offsets advancing by one element per step of `var` (Transpose keeping the last
    /// axis, Slice, Pad interiors, Gather rows). Such loops become one `memmove` per run
    /// instead of a vector loop recomputing both addresses every four elements (measured:
    /// ShuffleNet's channel-shuffle Transposes 2× faster).
    fn contiguous_copy<'s>(&self, var: u32, body: &'s [Stmt]) -> Option<CopyRun<'s>> {
        let [Stmt::Store { buf, offset, value }] = body else {
            return None;
        };
        let ExprKind::Load { input, index } = &value.kind else {
            return None;
        };
        let (dt_out, dt_in) = (
            self.prog.buffers[*buf as usize].dtype,
            self.prog.buffers[*input as usize].dtype,
        );
        let ok = *input != EPILOGUE_ACC
            && index.len() == 1
            && dt_out == dt_in
            && value.dtype == dt_in
            && dt_in.size() > 0
            && affine(offset)
            && affine(&index[0])
            && linear_coeff(offset, var) == Some(1)
            && linear_coeff(&index[0], var) == Some(1);
        ok.then_some(CopyRun {
            dst: *buf,
            dst_off: offset,
            src: *input,
            src_off: &index[0],
        })
    }

    /// `memmove(dst + dst_off(var = 0), src + src_off(var = 0), extent · size)`.
    fn copy_run(&mut self, v: Variable, extent: i64, run: CopyRun<'_>) {
        let z = self.b.ins().iconst(types::I64, 0);
        self.b.def_var(v, z);
        let mut memo = HashMap::new();
        let doff = self.eval(run.dst_off, &mut memo);
        let soff = self.eval(run.src_off, &mut memo);
        let dst = self.addr(run.dst, doff);
        let src = self.addr(run.src, soff);
        let bytes = extent * self.prog.buffers[run.dst as usize].dtype.size() as i64;
        let n = self.b.ins().iconst(PTR, bytes);
        let f = self
            .imports
            .func(&mut self.b, "memmove", &[PTR, PTR, PTR], &[PTR]);
        self.b.ins().call(f, &[dst, src, n]);
    }

    // ---- vector mode --------------------------------------------------------------------

    /// Whether `body` (a single f32 store, or a reduction producing one f32 output per `var`)
    /// can run 4 lanes at a time along `var`.
    fn vectorizable(&self, var: u32, body: &[Stmt]) -> bool {
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

    fn vec_ok(&self, e: &E, var: u32) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.vec_ok_memo(e, var, &mut seen)
    }

    /// `vec_ok` for an epilogue, whose accumulator is a vector.
    fn vec_ok_acc(&self, e: &E, var: u32) -> bool {
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

    fn vec_ok_placeholder(
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
    fn node_vec_ok(&self, e: &E) -> bool {
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

    fn vec_ok_memo(
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

    /// `max(x, c)` / `min(x, c)` for a non-NaN constant `c` (`clamp_const`), `x` a float
    /// scalar or float32x4: x86's min/max return their second operand when either is NaN, so
    /// with the constant first and x second they propagate x's NaN as fmin/fmax do, in one
    /// instruction where Cranelift's NaN-propagating fmin/fmax take eight (a branchy
    /// sequence for scalars). Cranelift matches `select`/`bitselect(fcmp lt c x, c, x)` to
    /// mins*/minps and `(fcmp lt x c, c, x)` to maxs*/maxps. Zeros: min(+0, -0) is -0
    /// either way; max(x, +0) of x = -0 gives -0 here, so +0.0 is added back (exact for
    /// every other value); min(x, -0) is not matched.
    fn clamp_insts(&mut self, op: BinOp, x: Value, c: f64) -> Value {
        let ty = self.b.func.dfg.value_type(x);
        let konst = |cx: &mut Self, v: f64| {
            let k = match ty.lane_type() {
                types::F64 => cx.b.ins().f64const(v),
                _ => cx.b.ins().f32const(v as f32),
            };
            if ty.is_vector() {
                cx.b.ins().splat(ty, k)
            } else {
                k
            }
        };
        let cv = konst(self, c);
        let lt = if op == BinOp::Min {
            self.b.ins().fcmp(FloatCC::LessThan, cv, x)
        } else {
            self.b.ins().fcmp(FloatCC::LessThan, x, cv)
        };
        let r = if ty.is_vector() {
            let mask = self.b.ins().bitcast(
                ty,
                MemFlagsData::new().with_endianness(ir::Endianness::Little),
                lt,
            );
            self.b.ins().bitselect(mask, cv, x)
        } else {
            self.b.ins().select(lt, cv, x)
        };
        if op == BinOp::Max && c == 0.0 && c.is_sign_positive() {
            let z = konst(self, 0.0);
            self.b.ins().fadd(r, z)
        } else {
            r
        }
    }

    /// `(buffer, signed, offset)` when `e` is `cast<float32>` of a uint8/int8 load contiguous
    /// along `var` (a quantized tensor read by a map): the vector loop loads four bytes.
    fn byte_load<'e>(&self, e: &'e E, var: u32) -> Option<(BufId, bool, &'e E)> {
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

    /// Computes, ahead of a vector loop over `var` whose body is a store, the maximal
    /// subexpressions that do not vary with `var`, read only buffers the function does not
    /// write and cost more than a load (divisions, square roots, transcendental functions:
    /// per-row statistics of a normalization and the arithmetic on them); the loop's body
    /// reloads them from stack slots. Cranelift's egraph elaboration places pure values at
    /// their uses and does not hoist ones whose operands include a rematerialized constant,
    /// so a value computed ahead of the loop but used inside it would be sunk back into it
    /// (measured: the LayerNorm map's two divisions and square root ran per vector); a stack
    /// slot pins it. Returns their keys.
    fn hoist_uniform(&mut self, var: u32, body: &[Stmt]) -> Vec<*const Expr> {
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

    fn uniform_roots(
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
    fn reads_only_inputs(&self, e: &E) -> bool {
        let mut used = Vec::new();
        crate::ir::expr::used_inputs(e, &mut used);
        used.iter().all(|b| !self.written.contains(b))
    }

    fn vector_body(&mut self, var: u32, body: &[Stmt]) {
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
    fn vector_reduce_outer(
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

    fn to_vec(&mut self, v: VV, ty: Type) -> Value {
        match v {
            VV::V(x) => x,
            VV::U(x) => self.b.ins().splat(ty, x),
        }
    }

    /// Mask from a scalar bool (0/1 i8): all-ones lanes when true.
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

    fn veval(
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
                    UnOp::Exp => super::vmath::exp(&mut self.b, self.fma, x),
                    UnOp::Tanh => super::vmath::tanh(&mut self.b, self.fma, x),
                    UnOp::Erf => super::vmath::erf(&mut self.b, self.fma, x),
                    UnOp::Sigmoid => super::vmath::sigmoid(&mut self.b, self.fma, x),
                    UnOp::Log => super::vmath::log(&mut self.b, self.fma, x),
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
                VV::V(super::vmath::pow_const(&mut self.b, self.fma, x, y))
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

pub fn collect_bufs(body: &[Stmt], out: &mut Vec<BufId>) {
    fn expr_bufs(e: &E, out: &mut Vec<BufId>) {
        let mut used = Vec::new();
        crate::ir::expr::used_inputs(e, &mut used);
        out.extend(used.into_iter().filter(|&b| b != EPILOGUE_ACC));
    }
    for s in body {
        match s {
            Stmt::For { body, .. } => collect_bufs(body, out),
            Stmt::Store { buf, offset, value } => {
                out.push(*buf);
                expr_bufs(offset, out);
                expr_bufs(value, out);
            }
            Stmt::Reduce {
                buf,
                offset,
                body,
                epilogue,
                ..
            } => {
                out.push(*buf);
                expr_bufs(offset, out);
                expr_bufs(body, out);
                if let Some(e) = epilogue {
                    expr_bufs(e, out);
                }
            }
            Stmt::Copy {
                dst,
                src,
                dst_offset,
                src_offset,
                ..
            } => {
                out.push(*dst);
                out.push(*src);
                expr_bufs(dst_offset, out);
                expr_bufs(src_offset, out);
            }
            Stmt::Check { cond, .. } => expr_bufs(cond, out),
            Stmt::Call { args, .. } => {
                for a in args {
                    match a {
                        Arg::Ptr { buf, offset } => {
                            out.push(*buf);
                            expr_bufs(offset, out);
                        }
                        Arg::Int(e) => expr_bufs(e, out),
                        Arg::Null
                        | Arg::Params(_)
                        | Arg::Floats(_)
                        | Arg::Blob(_)
                        | Arg::Scratch { .. } => {}
                    }
                }
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

/// Whether `e` is built from loop variables and constants by `+`, `-` and `*` only (no loads,
/// no index checks): its value over a run is known from its first element, so a copy of the
/// run stays inside the bounds the loop nest was built with.
fn affine(e: &E) -> bool {
    match &e.kind {
        ExprKind::Var(_) | ExprKind::Const(_) => true,
        ExprKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul, a, b) => affine(a) && affine(b),
        _ => false,
    }
}

fn mentions_acc(e: &E) -> bool {
    let mut used = Vec::new();
    crate::ir::expr::used_inputs(e, &mut used);
    used.contains(&EPILOGUE_ACC)
}

pub fn step_signature(call_conv: cranelift_codegen::isa::CallConv) -> ir::Signature {
    let mut sig = ir::Signature::new(call_conv);
    sig.params
        .extend([AbiParam::new(PTR), AbiParam::new(PTR), AbiParam::new(PTR)]);
    sig.returns.push(AbiParam::new(types::I32));
    sig
}

pub fn block_args(vals: &[Value]) -> Vec<BlockArg> {
    vals.iter().map(|v| BlockArg::Value(*v)).collect()
}

/// The float32 operand of an offset `cast<int64>(f)`: a data-dependent read the vector loop
/// makes lane by lane.
fn gather_index(offset: &E) -> Option<&E> {
    match &offset.kind {
        ExprKind::Cast(f) if offset.dtype == DType::I64 && f.dtype == DType::F32 => Some(f),
        _ => None,
    }
}

/// `(x, c)` when a float `max`/`min` has a non-NaN constant operand `c` the one-instruction
/// clamp handles (not `min(x, -0)`).
fn clamp_const<'a>(op: BinOp, a: &'a E, b: &'a E) -> Option<(&'a E, f64)> {
    if !matches!(a.dtype, DType::F32 | DType::F64) {
        return None;
    }
    let (x, c) = match (a.as_const(), b.as_const()) {
        (None, Some(c)) => (a, c),
        (Some(c), None) => (b, c),
        _ => return None,
    };
    let c = c.as_f64();
    let min_neg_zero = op == BinOp::Min && c == 0.0 && c.is_sign_negative();
    (!c.is_nan() && !min_neg_zero).then_some((x, c))
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
