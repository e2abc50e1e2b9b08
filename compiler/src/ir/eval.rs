//! Reference semantics of scalar operations, shared by constant folding and the interpreter.
//!
//! These are the semantics generated code must reproduce: f32 (and f16/bf16, which compute in
//! f32) operations round to f32 after every step; integer arithmetic wraps at the type's
//! width; integer division and remainder by zero give 0 instead of trapping; shifts by the
//! type's width or more give 0.

use super::dtype::DType;
use super::expr::{BinOp, UnOp};
use super::tensor::Scalar;

fn is_f32(dt: DType) -> bool {
    dt.compute_type() == DType::F32
}

/// Rounds a float result to the precision its type computes in.
fn fres(dt: DType, v: f64) -> Scalar {
    if is_f32(dt) {
        Scalar::F(v as f32 as f64)
    } else {
        Scalar::F(v)
    }
}

pub fn bits_of(dt: DType) -> u32 {
    (dt.size() * 8) as u32
}

/// The canonical scalar of integer type `dt` for an already wrapped value.
fn iwrap(dt: DType, v: i128) -> Scalar {
    if dt.is_signed_int() {
        Scalar::I(v as i64)
    } else {
        Scalar::U(v as u64)
    }
}

pub fn cast_scalar(v: Scalar, _from: DType, to: DType) -> Scalar {
    v.cast(to)
}

pub fn eval_unary(op: UnOp, dt: DType, x: Scalar) -> Option<Scalar> {
    if dt.is_float() {
        let v = x.as_f64();
        let f32m = is_f32(dt);
        let r = |f64op: fn(f64) -> f64, f32op: fn(f32) -> f32| {
            if f32m {
                f32op(v as f32) as f64
            } else {
                f64op(v)
            }
        };
        let out = match op {
            UnOp::Neg => -v,
            UnOp::Abs => v.abs(),
            UnOp::Sqrt => r(f64::sqrt, f32::sqrt),
            UnOp::Exp => r(f64::exp, f32::exp),
            UnOp::Log => r(f64::ln, f32::ln),
            UnOp::Sin => r(f64::sin, f32::sin),
            UnOp::Cos => r(f64::cos, f32::cos),
            UnOp::Tan => r(f64::tan, f32::tan),
            UnOp::Asin => r(f64::asin, f32::asin),
            UnOp::Acos => r(f64::acos, f32::acos),
            UnOp::Atan => r(f64::atan, f32::atan),
            UnOp::Sinh => r(f64::sinh, f32::sinh),
            UnOp::Cosh => r(f64::cosh, f32::cosh),
            UnOp::Tanh => r(f64::tanh, f32::tanh),
            UnOp::Asinh => r(f64::asinh, f32::asinh),
            UnOp::Acosh => r(f64::acosh, f32::acosh),
            UnOp::Atanh => r(f64::atanh, f32::atanh),
            UnOp::Erf => r(libm_erf, |x| libm_erf(x as f64) as f32),
            UnOp::Sigmoid => r(|x| 1.0 / (1.0 + (-x).exp()), |x| 1.0 / (1.0 + (-x).exp())),
            UnOp::Floor => v.floor(),
            UnOp::Ceil => v.ceil(),
            UnOp::Round => v.round_ties_even(),
            UnOp::Trunc => v.trunc(),
            UnOp::Sign => {
                if v.is_nan() {
                    v
                } else if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            UnOp::IsNan => return Some(Scalar::B(v.is_nan())),
            UnOp::IsPosInf => return Some(Scalar::B(v == f64::INFINITY)),
            UnOp::IsNegInf => return Some(Scalar::B(v == f64::NEG_INFINITY)),
            UnOp::Not | UnOp::BitNot => return None,
        };
        return Some(fres(dt, out));
    }
    if dt == DType::Bool {
        return match op {
            UnOp::Not => Some(Scalar::B(!x.as_bool())),
            _ => None,
        };
    }
    let signed = dt.is_signed_int();
    let v: i128 = if signed {
        x.as_i64() as i128
    } else {
        x.as_u64() as i128
    };
    let out = match op {
        UnOp::Neg => -v,
        UnOp::Abs => v.abs(),
        UnOp::Sign => v.signum(),
        UnOp::BitNot => !v,
        UnOp::Floor | UnOp::Ceil | UnOp::Round | UnOp::Trunc => v,
        UnOp::IsNan | UnOp::IsPosInf | UnOp::IsNegInf => return Some(Scalar::B(false)),
        _ => return None,
    };
    Some(iwrap(dt, wrap_i128(out, bits_of(dt), signed)))
}

pub fn eval_binary(op: BinOp, dt: DType, a: Scalar, b: Scalar) -> Scalar {
    if dt.is_float() {
        let (x, y) = (a.as_f64(), b.as_f64());
        let f32m = is_f32(dt);
        let cmp = |c: bool| Scalar::B(c);
        let (xf, yf) = (x as f32, y as f32);
        return match op {
            BinOp::Add => fres(dt, if f32m { (xf + yf) as f64 } else { x + y }),
            BinOp::Sub => fres(dt, if f32m { (xf - yf) as f64 } else { x - y }),
            BinOp::Mul => fres(dt, if f32m { (xf * yf) as f64 } else { x * y }),
            BinOp::Div => fres(dt, if f32m { (xf / yf) as f64 } else { x / y }),
            BinOp::Rem => fres(dt, if f32m { (xf % yf) as f64 } else { x % y }),
            BinOp::FloorMod => {
                let r = if f32m { (xf % yf) as f64 } else { x % y };
                let r = if r != 0.0 && ((r < 0.0) != (y < 0.0)) {
                    r + y
                } else {
                    r
                };
                fres(dt, r)
            }
            BinOp::Pow => fres(dt, if f32m { xf.powf(yf) as f64 } else { x.powf(y) }),
            BinOp::Max => fres(
                dt,
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.max(y)
                },
            ),
            BinOp::Min => fres(
                dt,
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else {
                    x.min(y)
                },
            ),
            BinOp::Eq => cmp(x == y),
            BinOp::Lt => cmp(x < y),
            BinOp::Le => cmp(x <= y),
            BinOp::Gt => cmp(x > y),
            BinOp::Ge => cmp(x >= y),
            BinOp::And
            | BinOp::Or
            | BinOp::Xor
            | BinOp::BitAnd
            | BinOp::BitOr
            | BinOp::BitXor
            | BinOp::Shl
            | BinOp::Shr => Scalar::F(f64::NAN),
        };
    }
    if dt == DType::Bool {
        let (x, y) = (a.as_bool(), b.as_bool());
        return Scalar::B(match op {
            BinOp::And | BinOp::BitAnd | BinOp::Mul | BinOp::Min => x & y,
            BinOp::Or | BinOp::BitOr | BinOp::Add | BinOp::Max => x | y,
            BinOp::Xor | BinOp::BitXor | BinOp::Sub => x ^ y,
            BinOp::Eq => x == y,
            BinOp::Lt => !x & y,
            BinOp::Le => !x | y,
            BinOp::Gt => x & !y,
            BinOp::Ge => x | !y,
            _ => false,
        });
    }
    let signed = dt.is_signed_int();
    let bits = bits_of(dt);
    let (x, y): (i128, i128) = if signed {
        (a.as_i64() as i128, b.as_i64() as i128)
    } else {
        (a.as_u64() as i128, b.as_u64() as i128)
    };
    let out = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => {
            if y == 0 {
                0
            } else {
                x / y
            }
        }
        BinOp::Rem => {
            if y == 0 {
                0
            } else {
                x % y
            }
        }
        BinOp::FloorMod => {
            if y == 0 {
                0
            } else {
                let r = x % y;
                if r != 0 && ((r < 0) != (y < 0)) {
                    r + y
                } else {
                    r
                }
            }
        }
        BinOp::Pow => {
            if y < 0 {
                match x {
                    1 => 1,
                    -1 => {
                        if y % 2 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                }
            } else {
                let mut r: i128 = 1;
                let mut base = x;
                let mut e = y;
                while e > 0 {
                    if e & 1 == 1 {
                        r = wrap_i128(r.wrapping_mul(base), bits, signed);
                    }
                    base = wrap_i128(base.wrapping_mul(base), bits, signed);
                    e >>= 1;
                }
                r
            }
        }
        BinOp::Max => x.max(y),
        BinOp::Min => x.min(y),
        BinOp::BitAnd | BinOp::And => x & y,
        BinOp::BitOr | BinOp::Or => x | y,
        BinOp::BitXor | BinOp::Xor => x ^ y,
        BinOp::Shl => {
            if y < 0 || y >= bits as i128 {
                0
            } else {
                x << y
            }
        }
        BinOp::Shr => {
            if y < 0 || y >= bits as i128 {
                if signed && x < 0 { -1 } else { 0 }
            } else {
                x >> y
            }
        }
        BinOp::Eq => return Scalar::B(x == y),
        BinOp::Lt => return Scalar::B(x < y),
        BinOp::Le => return Scalar::B(x <= y),
        BinOp::Gt => return Scalar::B(x > y),
        BinOp::Ge => return Scalar::B(x >= y),
    };
    iwrap(dt, wrap_i128(out, bits, signed))
}

fn wrap_i128(v: i128, bits: u32, signed: bool) -> i128 {
    let m = v & ((1i128 << bits) - 1);
    if signed && m >= (1i128 << (bits - 1)) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// Error function (Abramowitz–Stegun 7.1.26 is too coarse; this is the W. J. Cody rational
/// approximation as used by most libms, accurate to ~1e-16).
pub fn libm_erf(x: f64) -> f64 {
    // erf via erfc for large |x|, series/rational otherwise.
    let ax = x.abs();
    let r = if ax < 0.5 {
        let t = x * x;
        let p = [
            3.209_377_589_138_469_4e3,
            3.774_852_376_853_02e2,
            1.138_641_541_510_501_6e2,
            3.161_123_743_870_565_6,
            1.857_777_061_846_031_5e-1,
        ];
        let q = [
            2.844_236_833_439_171e3,
            1.282_616_526_077_372_3e3,
            2.440_246_379_344_441_7e2,
            2.360_129_095_234_412_1e1,
            1.0,
        ];
        let num = (((p[4] * t + p[3]) * t + p[2]) * t + p[1]) * t + p[0];
        let den = (((q[4] * t + q[3]) * t + q[2]) * t + q[1]) * t + q[0];
        return x * num / den;
    } else if ax < 4.0 {
        let p = [
            1.230_339_354_797_997_2e3,
            2.051_078_377_826_071_5e3,
            1.712_047_612_634_070_7e3,
            8.819_522_212_417_69e2,
            2.986_351_381_974_001e2,
            6.611_919_063_714_163e1,
            8.883_149_794_388_376e0,
            5.641_884_969_886_701e-1,
            2.153_115_354_744_038_5e-8,
        ];
        let q = [
            1.230_339_354_803_749_4e3,
            3.439_367_674_143_721_6e3,
            4.362_619_090_143_247e3,
            3.290_799_235_733_459_7e3,
            1.621_389_574_566_690_2e3,
            5.371_811_018_620_099e2,
            1.176_939_508_913_125e2,
            1.574_492_611_070_983_5e1,
            1.0,
        ];
        let mut num = p[8];
        let mut den = q[8];
        for k in (0..8).rev() {
            num = num * ax + p[k];
            den = den * ax + q[k];
        }
        (-ax * ax).exp() * num / den
    } else {
        let p = [
            -6.587_491_615_298_378e-4,
            -1.608_378_514_874_227_5e-2,
            -1.257_817_261_112_292_5e-1,
            -3.603_448_999_498_044_5e-1,
            -3.053_266_349_612_323_4e-1,
            -1.631_538_713_730_709_7e-2,
        ];
        let q = [
            2.335_204_976_268_691_8e-3,
            6.051_834_131_244_132e-2,
            5.279_051_029_514_284e-1,
            1.872_952_849_923_460_4,
            2.568_520_192_289_822,
            1.0,
        ];
        let t = 1.0 / (ax * ax);
        let mut num = p[5];
        let mut den = q[5];
        for k in (0..5).rev() {
            num = num * t + p[k];
            den = den * t + q[k];
        }
        let frac_1_sqrt_pi = 0.564_189_583_547_756_3;
        (-ax * ax).exp() / ax * (frac_1_sqrt_pi + t * num / den)
    };
    // r is erfc(|x|) here.
    let e = 1.0 - r;
    if x < 0.0 { -e } else { e }
}
