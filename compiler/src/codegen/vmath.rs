//! Vectorized f32x4 math: exp, tanh, erf and sigmoid as polynomial approximations in CLIF
//! (Cephes / Eigen coefficients, a few ulp), so elementwise loops need no libm call per lane.

// The runtime's softmax kernel evaluates the same expf: one set of constants.
use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};
use cranelift_frontend::FunctionBuilder;
use onnxc_runtime::gelu::{ERF_LIMIT, ERF_P, ERF_Q, ERF_SATURATES};
use onnxc_runtime::softmax::{EXP_POLY, LN2_HI, LN2_LO};

pub(crate) fn splat(b: &mut FunctionBuilder, v: f32) -> Value {
    let c = b.ins().f32const(v);
    b.ins().splat(types::F32X4, c)
}

/// Whether the target has fused multiply-add (x86 FMA3; always on aarch64): polynomial steps
/// are then one instruction with one rounding instead of a multiply and an add.
#[derive(Copy, Clone, Debug)]
pub struct Fma(pub bool);

/// `a * x + c`: one fused operation with FMA, else two rounded ones.
fn madd(b: &mut FunctionBuilder, fma: Fma, a: Value, x: Value, c: f32) -> Value {
    let k = splat(b, c);
    if fma.0 {
        return b.ins().fma(a, x, k);
    }
    let m = b.ins().fmul(a, x);
    b.ins().fadd(m, k)
}

fn poly(b: &mut FunctionBuilder, fma: Fma, x: Value, coeffs: &[f32]) -> Value {
    let mut p = splat(b, coeffs[0]);
    for &c in &coeffs[1..] {
        p = madd(b, fma, p, x, c);
    }
    p
}

/// min/max for clamping: `x < y ? x : y` and `y < x ? x : y`, the forms Cranelift lowers to
/// a single `minps`/`maxps` on x86 (instead of the NaN-propagating `fmin`/`fmax`
/// sequences). Both return `y` when either operand is NaN, so `min(limit, v)` passes a NaN
/// `v` through — the clamps below are written that way and need no NaN fix-up after.
fn min(b: &mut FunctionBuilder, x: Value, y: Value) -> Value {
    let lt = b.ins().fcmp(FloatCC::LessThan, x, y);
    select(b, lt, x, y)
}

fn max(b: &mut FunctionBuilder, x: Value, y: Value) -> Value {
    let lt = b.ins().fcmp(FloatCC::LessThan, y, x);
    select(b, lt, x, y)
}

fn select(b: &mut FunctionBuilder, mask: Value, x: Value, y: Value) -> Value {
    let m = b.ins().bitcast(
        types::F32X4,
        MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little),
        mask,
    );
    b.ins().bitselect(m, x, y)
}

/// e^x: x = n·ln2 + r, e^r by a degree-6 polynomial, 2^n from the exponent bits.
pub fn exp(b: &mut FunctionBuilder, fma: Fma, x: Value) -> Value {
    let hi = splat(b, 88.722_83);
    // ln(2^-150): below it e^x rounds to 0; between it and ln(FLT_MIN) ≈ -87.34 the result
    // is subnormal (gradual underflow, as libm's expf and onnxruntime give: softplus(-88)
    // is e^-88, not 0).
    let lo = splat(b, -103.972_08);
    // NaN passes both clamps and every step after (the range selects compare false).
    let xc = min(b, hi, x);
    let xc = max(b, lo, xc);
    let log2e = splat(b, std::f32::consts::LOG2_E);
    let t = b.ins().fmul(xc, log2e);
    let n = b.ins().nearest(t);
    let c1 = splat(b, LN2_HI);
    let c2 = splat(b, LN2_LO);
    let r = b.ins().fmul(n, c1);
    let r = b.ins().fsub(xc, r);
    let r2 = b.ins().fmul(n, c2);
    let r = b.ins().fsub(r, r2);
    let p = poly(b, fma, r, &EXP_POLY);
    let r2 = b.ins().fmul(r, r);
    let p = b.ins().fmul(p, r2);
    let p = b.ins().fadd(p, r);
    let one = splat(b, 1.0);
    let p = b.ins().fadd(p, one);
    // 2^n for n in [-150, 128] as 2^n1 · 2^n2 with n1 = n >> 1, n2 = n − n1 (each a normal
    // float's exponent), so the last multiply rounds a subnormal result once. n is read off
    // the mantissa of n + 1.5·2^23 instead of a saturating conversion, which x86 lowers to a
    // long sequence.
    let magic = splat(b, 12_582_912.0);
    let shifted = b.ins().fadd(n, magic);
    let ni = b.ins().bitcast(
        types::I32X4,
        MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little),
        shifted,
    );
    let unbias = b.ins().iconst(types::I32, -0x4B40_0000);
    let unbias = b.ins().splat(types::I32X4, unbias);
    let ni = b.ins().iadd(ni, unbias);
    let n1 = b.ins().sshr_imm_s(ni, 1);
    let n2 = b.ins().isub(ni, n1);
    let bias = b.ins().iconst(types::I32, 127);
    let bias = b.ins().splat(types::I32X4, bias);
    let mut y = p;
    for k in [n1, n2] {
        let e = b.ins().iadd(k, bias);
        let e = b.ins().ishl_imm_s(e, 23);
        let scale = b.ins().bitcast(
            types::F32X4,
            MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little),
            e,
        );
        y = b.ins().fmul(y, scale);
    }
    // Overflow to +inf above the range, NaN stays NaN.
    let inf = splat(b, f32::INFINITY);
    let over = b.ins().fcmp(FloatCC::GreaterThan, x, hi);
    let y = select(b, over, inf, y);
    let zero = splat(b, 0.0);
    let under = b.ins().fcmp(FloatCC::LessThan, x, lo);
    select(b, under, zero, y)
}

/// 1 / (1 + e^-x).
pub fn sigmoid(b: &mut FunctionBuilder, fma: Fma, x: Value) -> Value {
    let n = b.ins().fneg(x);
    let e = exp(b, fma, n);
    let one = splat(b, 1.0);
    let d = b.ins().fadd(one, e);
    b.ins().fdiv(one, d)
}

/// tanh: an odd polynomial for |x| < 0.625, (1 - 2/(e^{2|x|} + 1))·sign(x) beyond.
pub fn tanh(b: &mut FunctionBuilder, fma: Fma, x: Value) -> Value {
    let ax = b.ins().fabs(x);
    let z = b.ins().fmul(x, x);
    let p = poly(
        b,
        fma,
        z,
        &[
            -5.704_988_7e-3,
            2.063_909e-2,
            -5.373_971_6e-2,
            1.333_144_2e-1,
            -3.333_328e-1,
        ],
    );
    let p = b.ins().fmul(p, z);
    let p = b.ins().fmul(p, x);
    let small = b.ins().fadd(p, x);
    // From 9.010914 on tanh rounds to ±1; clamping at 9.1 keeps 1 − 2/(e^2|x| + 1) there
    // (at 9.0 it stayed an ulp short: tanh(-50) was -0.99999994).
    let lim = splat(b, 9.1);
    // A NaN `ax` passes the clamp, so `big` (and `small`) are NaN.
    let axc = min(b, lim, ax);
    let two_ax = b.ins().fadd(axc, axc);
    let e = exp(b, fma, two_ax);
    let one = splat(b, 1.0);
    let two = splat(b, 2.0);
    let d = b.ins().fadd(e, one);
    let q = b.ins().fdiv(two, d);
    let big = b.ins().fsub(one, q);
    let neg = splat(b, -0.0);
    let sign = b.ins().band(x, neg);
    let big = b.ins().bor(big, sign);
    let cut = splat(b, 0.625);
    let is_small = b.ins().fcmp(FloatCC::LessThan, ax, cut);
    select(b, is_small, small, big)
}

/// erf: Eigen's rational approximation on [-4, 4] (erf(±4) = ±1 in f32).
pub fn erf(b: &mut FunctionBuilder, fma: Fma, x: Value) -> Value {
    let lim = splat(b, ERF_LIMIT);
    let nlim = splat(b, -ERF_LIMIT);
    // NaN passes both clamps, so p/q is NaN.
    let xc = min(b, lim, x);
    let xc = max(b, nlim, xc);
    let x2 = b.ins().fmul(xc, xc);
    let p = poly(b, fma, x2, &ERF_P);
    let p = b.ins().fmul(xc, p);
    let q = poly(b, fma, x2, &ERF_Q);
    let r = b.ins().fdiv(p, q);
    // Beyond ERF_SATURATES, erf(x) rounds to ±1 in f32; the rational form ends an ulp short
    // there (erf(-100) was -0.99999994, so Ceil or 1 + erf saw the difference). As the
    // runtime's `simd::math::erf`.
    let ax = b.ins().fabs(x);
    let sat = splat(b, ERF_SATURATES);
    let big = b.ins().fcmp(FloatCC::GreaterThan, ax, sat);
    // ±1 with x's sign (Cranelift has no vector copysign on x86).
    let neg = splat(b, -0.0);
    let sign = b.ins().band(x, neg);
    let one = splat(b, 1.0);
    let unit = b.ins().bor(one, sign);
    select(b, big, unit, r)
}

/// ln(x) (Cephes logf): x = m·2^e with m in [√½, √2), a degree-8 polynomial in m − 1.
/// ln(0) = -inf, ln(x < 0) = NaN, ln(inf) = inf.
pub fn log(b: &mut FunctionBuilder, fma: Fma, x: Value) -> Value {
    let flags = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
    // A subnormal x is scaled by 2^24 into the normal range first; its exponent is corrected
    // below (ln(5.9e-39) is -88, not -inf).
    let zero = splat(b, 0.0);
    let tiny = splat(b, f32::MIN_POSITIVE);
    let below = b.ins().fcmp(FloatCC::LessThan, x, tiny);
    let pos = b.ins().fcmp(FloatCC::GreaterThan, x, zero);
    let subnormal = b.ins().band(below, pos);
    let two24 = splat(b, 16_777_216.0);
    let scaled = b.ins().fmul(x, two24);
    let xn = select(b, subnormal, scaled, x);
    let bits = b.ins().bitcast(types::I32X4, flags, xn);
    let e = b.ins().ushr_imm_s(bits, 23);
    let mantissa_mask = b.ins().iconst(types::I32, 0x007f_ffff);
    let mantissa_mask = b.ins().splat(types::I32X4, mantissa_mask);
    let half_bits = b.ins().iconst(types::I32, 0x3f00_0000);
    let half_bits = b.ins().splat(types::I32X4, half_bits);
    let m = b.ins().band(bits, mantissa_mask);
    let m = b.ins().bor(m, half_bits);
    let m = b.ins().bitcast(types::F32X4, flags, m); // m in [0.5, 1)
    let bias = b.ins().iconst(types::I32, 126);
    let bias = b.ins().splat(types::I32X4, bias);
    let e = b.ins().isub(e, bias);
    let e = b.ins().fcvt_from_sint(types::F32X4, e);
    let e24 = splat(b, 24.0);
    let e_scaled = b.ins().fsub(e, e24);
    let e = select(b, subnormal, e_scaled, e);
    // If m < √½: m = 2m, e -= 1; then x = m - 1.
    let sqrt_half = splat(b, std::f32::consts::FRAC_1_SQRT_2);
    let small = b.ins().fcmp(FloatCC::LessThan, m, sqrt_half);
    let one = splat(b, 1.0);
    let m2 = b.ins().fadd(m, m);
    let m = select(b, small, m2, m);
    let e_adj = select(b, small, one, zero);
    let e = b.ins().fsub(e, e_adj);
    let xm = b.ins().fsub(m, one);
    let z = b.ins().fmul(xm, xm);
    let p = poly(
        b,
        fma,
        xm,
        &[
            7.037_683_6e-2,
            -1.151_461e-1,
            1.167_699_8e-1,
            -1.242_014_1e-1,
            1.424_932_3e-1,
            -1.666_805_7e-1,
            2.000_071_4e-1,
            -2.499_999_4e-1,
            3.333_333e-1,
        ],
    );
    let p = b.ins().fmul(p, xm);
    let p = b.ins().fmul(p, z);
    let c1 = splat(b, -2.121_944_4e-4);
    let t = b.ins().fmul(e, c1);
    let p = b.ins().fadd(p, t);
    let hz = splat(b, 0.5);
    let t = b.ins().fmul(z, hz);
    let p = b.ins().fsub(p, t);
    let r = b.ins().fadd(xm, p);
    let c2 = splat(b, 0.693_359_4);
    let t = b.ins().fmul(e, c2);
    let r = b.ins().fadd(r, t);
    // Special values.
    let ninf = splat(b, f32::NEG_INFINITY);
    let inf = splat(b, f32::INFINITY);
    let nan = splat(b, f32::NAN);
    let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
    let r = select(b, is_zero, ninf, r);
    let is_inf = b.ins().fcmp(FloatCC::Equal, x, inf);
    let r = select(b, is_inf, inf, r);
    let bad = b.ins().fcmp(FloatCC::UnorderedOrLessThan, x, zero);
    select(b, bad, nan, r)
}

/// x^y for a constant exponent y, with C `powf` semantics for negative bases (odd/even
/// integer exponents) and zero.
pub fn pow_const(b: &mut FunctionBuilder, fma: Fma, x: Value, y: f32) -> Value {
    if y == 1.0 {
        return x;
    }
    if !y.is_finite() {
        // C powf: pow(±1, ±inf) = 1 and pow(1, NaN) = 1; |x| < 1 goes to 0 for +inf and to
        // +inf for -inf, |x| > 1 the other way; pow(x, NaN) and pow(NaN, ±inf) are NaN.
        let one = splat(b, 1.0);
        let nan = splat(b, f32::NAN);
        let ax = b.ins().fabs(x);
        let r = if y.is_nan() {
            nan
        } else {
            let (small, large) = if y > 0.0 {
                (0.0, f32::INFINITY)
            } else {
                (f32::INFINITY, 0.0)
            };
            let (small, large) = (splat(b, small), splat(b, large));
            let lt = b.ins().fcmp(FloatCC::LessThan, ax, one);
            let r = select(b, lt, small, large);
            let is_nan = b.ins().fcmp(FloatCC::Unordered, x, x);
            select(b, is_nan, nan, r)
        };
        let unit = if y.is_nan() {
            b.ins().fcmp(FloatCC::Equal, x, one)
        } else {
            b.ins().fcmp(FloatCC::Equal, ax, one)
        };
        return select(b, unit, one, r);
    }
    if y == 2.0 {
        return b.ins().fmul(x, x);
    }
    if y == 0.0 {
        return splat(b, 1.0);
    }
    if y == 0.5 {
        // powf(-0, 0.5) = +0, powf(-inf, 0.5) = inf; sqrt gives -0 and NaN there.
        let ax = b.ins().fabs(x);
        let s = b.ins().sqrt(x);
        let zero = splat(b, 0.0);
        let ninf = splat(b, f32::NEG_INFINITY);
        let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
        let s = select(b, is_zero, zero, s);
        let is_ninf = b.ins().fcmp(FloatCC::Equal, x, ninf);
        return select(b, is_ninf, ax, s);
    }
    // Multiples of 1/4 (LRN's 0.75, x^1.5, …): products of sqrt, exact and fast.
    let q = y * 4.0;
    if q.fract() == 0.0 && q.abs() <= 16.0 {
        let q = q as i32;
        let (whole, quarters) = (q.abs() / 4, q.abs() % 4);
        // A fractional exponent works on |x| (powf(±0, y) and powf(-inf, y) are those of
        // +0 and +inf); other negative bases give NaN below.
        let base = if quarters > 0 { b.ins().fabs(x) } else { x };
        let one = splat(b, 1.0);
        let mut r = one;
        for _ in 0..whole {
            r = b.ins().fmul(r, base);
        }
        if quarters > 0 {
            let s2 = b.ins().sqrt(base);
            let s4 = b.ins().sqrt(s2);
            let f = match quarters {
                1 => s4,
                2 => s2,
                _ => b.ins().fmul(s2, s4),
            };
            r = b.ins().fmul(r, f);
        }
        let r = if q < 0 { b.ins().fdiv(one, r) } else { r };
        if quarters == 0 {
            return r;
        }
        let zero = splat(b, 0.0);
        let ninf = splat(b, f32::NEG_INFINITY);
        let nan = splat(b, f32::NAN);
        let neg = b.ins().fcmp(FloatCC::LessThan, x, zero);
        let finite = b.ins().fcmp(FloatCC::NotEqual, x, ninf);
        let bad = b.ins().band(neg, finite);
        return select(b, bad, nan, r);
    }
    let ax = b.ins().fabs(x);
    let l = log(b, fma, ax);
    let yv = splat(b, y);
    let t = b.ins().fmul(l, yv);
    let r = exp(b, fma, t);
    // Negative bases: an odd integer exponent keeps the sign, a non-integer gives NaN.
    let zero = splat(b, 0.0);
    let neg = b.ins().fcmp(FloatCC::LessThan, x, zero);
    let integral = y.fract() == 0.0 && y.abs() < 1.6e7;
    let odd = integral && (y as i64) % 2 != 0;
    let neg_r = if odd {
        b.ins().fneg(r)
    } else if integral {
        r
    } else {
        // NaN, except powf(-inf, y) = powf(+inf, y) for a non-integer y.
        let ninf = splat(b, f32::NEG_INFINITY);
        let is_ninf = b.ins().fcmp(FloatCC::Equal, x, ninf);
        let nan = splat(b, f32::NAN);
        select(b, is_ninf, r, nan)
    };
    let r = select(b, neg, neg_r, r);
    // 0^y: 0 for y > 0, inf for y < 0, keeping the zero's sign for odd integers.
    let is_zero = b.ins().fcmp(FloatCC::Equal, x, zero);
    let z = match (odd, y > 0.0) {
        (true, true) => x,
        (true, false) => {
            let one = splat(b, 1.0);
            b.ins().fdiv(one, x)
        }
        (false, true) => splat(b, 0.0),
        (false, false) => splat(b, f32::INFINITY),
    };
    select(b, is_zero, z, r)
}
