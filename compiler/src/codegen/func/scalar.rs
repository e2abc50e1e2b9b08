//! Scalar expression code: one element of any type per evaluation.
//!
//! `eval` computes an expression tree node by node, memoized per statement (the tree is
//! hash-consed, so a shared subexpression is computed once), reading hoisted loop
//! invariants from their stack slots first. Integer division never traps; float functions
//! without an instruction call libm; `convert` has ONNX Cast semantics (saturating
//! float→int, rounding to f16/bf16). `clamp_insts` is the one-instruction constant clamp
//! shared with the vector code.

use super::{FnCx, PTR, clif_ty, is_unsigned};
use crate::ir::expr::{BinOp, E, Expr, ExprKind, UnOp};
use crate::ir::{DType, Scalar};
use crate::schedule::EPILOGUE_ACC;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, Type, Value, types};
use std::collections::HashMap;
use std::sync::Arc;

impl FnCx<'_, '_> {
    /// Round-to-nearest-even f32 → bf16 bits (NaN stays a quiet NaN).
    pub(super) fn f32_to_bf16_bits(&mut self, v: Value) -> Value {
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

    pub(super) fn konst(&mut self, dt: DType, c: Scalar) -> Value {
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

    fn call1_typed(&mut self, name: &str, params: &[Type], ret: Type, args: &[Value]) -> Value {
        let f = self.imports.func(&mut self.b, name, params, &[ret]);
        let c = self.b.ins().call(f, args);
        self.b.inst_results(c)[0]
    }

    /// Scalar evaluation, memoized per statement.
    pub(super) fn eval(&mut self, e: &E, memo: &mut HashMap<*const Expr, Value>) -> Value {
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
            ExprKind::Binary(op, a, b) => match clamp_const(*op, a, b) {
                // A clamp against a constant: one minss/maxsd (`clamp_insts`).
                Some((x, c)) => {
                    let xv = self.eval(x, memo);
                    self.clamp_insts(*op, xv, c)
                }
                // x² is one product, correctly rounded as powf's result is (the vector form,
                // `vmath::pow_const`, computes it so too): no libm call per element in a
                // loop too short for vectors (a YOLO decode's `[.., 2]`).
                None if *op == BinOp::Pow
                    && a.dtype.is_float()
                    && b.as_const().is_some_and(|c| c.as_f64() == 2.0) =>
                {
                    let x = self.eval(a, memo);
                    self.b.ins().fmul(x, x)
                }
                None => {
                    let x = self.eval(a, memo);
                    let y = self.eval(b, memo);
                    self.binary(*op, a.dtype, x, y)
                }
            },
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

    pub(super) fn unary(&mut self, op: UnOp, dt: DType, x: Value) -> Value {
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

    pub(super) fn binary(&mut self, op: BinOp, dt: DType, x: Value, y: Value) -> Value {
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
        match op {
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
        }
    }

    /// Converts a computed value between element types with ONNX Cast semantics.
    pub fn convert(&mut self, x: Value, from: DType, to: DType) -> Value {
        if from == to {
            return x;
        }
        let v = self.convert_computed(x, from, to);
        // 4- and 2-bit integers wrap as ONNX's reference does (`ml_dtypes`): the low bits,
        // sign-extended for the signed ones.
        match (to, to.packed_bits()) {
            (DType::I4 | DType::I2, Some(bits)) => {
                let sh = 8 - bits as i64;
                let l = self.b.ins().ishl_imm_s(v, sh);
                self.b.ins().sshr_imm_s(l, sh)
            }
            (DType::U4 | DType::U2, Some(bits)) => self.b.ins().band_imm_s(v, (1 << bits) - 1),
            _ => v,
        }
    }

    /// `convert` into `to`'s compute type (`clif_ty`), rounding narrow floats.
    fn convert_computed(&mut self, x: Value, from: DType, to: DType) -> Value {
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
                // Rounded, not saturating (`onnxc_runtime::lowp::round`): the frontend
                // clamps first where ONNX saturates (`build::cast_expr`).
                dt if dt.is_lowp_float() => {
                    let fmt = self.b.ins().iconst(types::I32, dt.onnx_code() as i64);
                    let f = self.imports.func(
                        &mut self.b,
                        "onnxc_lowp_round",
                        &[types::F32, types::I32],
                        &[types::F32],
                    );
                    let c = self.b.ins().call(f, &[v, fmt]);
                    self.b.inst_results(c)[0]
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

    /// `max(x, c)` / `min(x, c)` for a non-NaN constant `c` (`clamp_const`), `x` a float
    /// scalar or float32x4: x86's min/max return their second operand when either is NaN, so
    /// with the constant first and x second they propagate x's NaN as fmin/fmax do, in one
    /// instruction where Cranelift's NaN-propagating fmin/fmax take eight (a branchy
    /// sequence for scalars). Cranelift matches `select`/`bitselect(fcmp lt c x, c, x)` to
    /// mins*/minps and `(fcmp lt x c, c, x)` to maxs*/maxps. Zeros: min(+0, -0) is -0
    /// either way; max(x, +0) of x = -0 gives -0 here, so +0.0 is added back (exact for
    /// every other value); min(x, -0) is not matched.
    pub(super) fn clamp_insts(&mut self, op: BinOp, x: Value, c: f64) -> Value {
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
}

/// `(x, c)` when a float `max`/`min` has a non-NaN constant operand `c` the one-instruction
/// clamp handles (not `min(x, -0)`).
pub(super) fn clamp_const<'a>(op: BinOp, a: &'a E, b: &'a E) -> Option<(&'a E, f64)> {
    if !matches!(op, BinOp::Max | BinOp::Min) || !matches!(a.dtype, DType::F32 | DType::F64) {
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
