//! Vector math written once over [`Simd`]: e^x, tanh, erf, with the constants the
//! compiler's generated vector math (`codegen::vmath`) reads too, so the kernels and the
//! generated code compute the same formulas.
//!
//! e^x is Cephes' expf: `n = round(x·log2 e)`, `r = x − n·ln 2` (ln 2 in two parts), a
//! degree-7 polynomial in `r`, then `·2^n` through `Simd::scale2` (IEEE overflow to ∞ and
//! gradual underflow, one rounding). The argument is first clamped to `[EXP_MIN, EXP_MAX]`
//! with the constants as the first operands of `max`/`min`, so NaN passes through.

use super::Simd;

/// Cephes' expf polynomial on the reduced argument (|r| ≤ ln2/2), highest degree first.
pub const EXP_POLY: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5.0e-1,
];
/// ln 2 split in two for an exact `n · ln2` subtraction.
pub const LN2_HI: f32 = 0.693_359_4;
pub const LN2_LO: f32 = -2.121_944_4e-4;
/// The clamp of e^x's argument: e^89 overflows to ∞ and e^−110 underflows to 0, and
/// `round(x·log2 e)` stays in `scale2`'s range in between.
pub const EXP_MAX: f32 = 89.0;
pub const EXP_MIN: f32 = -110.0;

/// tanh's odd polynomial in x² for |x| < `TANH_CUT`, highest degree first.
pub const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_909e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];
pub const TANH_CUT: f32 = 0.625;
/// From 9.010914 on tanh rounds to ±1; clamping |x| at 9.1 keeps `1 − 2/(e^{2|x|} + 1)`
/// exact there.
pub const TANH_LIMIT: f32 = 9.1;

/// Numerator coefficients of erf in x², highest degree first (times x).
pub const ERF_P: [f32; 7] = [
    -2.726_142_3e-10,
    2.770_681_4e-8,
    -2.101_024e-6,
    -5.692_506_4e-5,
    -7.349_906_3e-4,
    -2.954_6e-3,
    -1.609_603_3e-2,
];
/// Denominator coefficients of erf in x², highest degree first.
pub const ERF_Q: [f32; 5] = [
    -1.456_607_2e-5,
    -2.133_740_6e-4,
    -1.682_827e-3,
    -7.373_329e-3,
    -1.426_474e-2,
];
/// erf's argument is clamped to [-ERF_LIMIT, ERF_LIMIT] (|erf| rounds to 1 beyond).
pub const ERF_LIMIT: f32 = 4.0;
/// Beyond this |x|, erf(x) rounds to ±1 in float32; the rational form ends an ulp short
/// there (0.99999994), which `1 + erf(x)` (GELU, Erf then Add) turns into a residue of
/// 6e-8 instead of 0: GELU(-1e30) came out as -6e22. Both the runtime's erf and the
/// generated code's return ±1 beyond it.
pub const ERF_SATURATES: f32 = 3.919_206;

/// A polynomial with coefficients highest degree first, by Horner's rule in fused steps.
#[inline(always)]
pub fn poly<S: Simd>(s: S, coef: &[f32], x: S::F) -> S::F {
    let mut p = s.splat(coef[0]);
    for &c in &coef[1..] {
        p = s.mul_add(p, x, s.splat(c));
    }
    p
}

/// e^x per lane: ∞ above 88.72, gradual underflow to 0 below −87.3, NaN through.
#[inline(always)]
pub fn exp<S: Simd>(s: S, x: S::F) -> S::F {
    let (p, n) = exp_parts(s, s.max(s.splat(EXP_MIN), s.min(s.splat(EXP_MAX), x)));
    s.scale2(p, n)
}

/// `(p, n)` with `e^x = p·2^n` for a clamped argument: `n = round(x·log2 e)`, `p` the
/// polynomial of `r = x − n·ln 2` (|r| ≤ ln2/2, so `p` lies in [2^−0.5, 2^0.5]).
#[inline(always)]
fn exp_parts<S: Simd>(s: S, x: S::F) -> (S::F, S::F) {
    let n = s.round(s.mul(x, s.splat(std::f32::consts::LOG2_E)));
    let r = s.neg_mul_add(n, s.splat(LN2_HI), x);
    let r = s.neg_mul_add(n, s.splat(LN2_LO), r);
    let p = poly(s, &EXP_POLY, r);
    (s.add(s.mul_add(p, s.mul(r, r), r), s.splat(1.0)), n)
}

/// The least argument of [`exp_nonpositive`] computed: from it up, `round(x·log2 e)` is at
/// least −125, so `p·2^n` stays normal; below it the result is flushed to 0 (e^x < 2.9e−38).
pub const EXP_NORMAL_MIN: f32 = -86.9;

/// e^x per lane for x ≤ 0 (a softmax's `s·(x − max)`): e^x's formula as [`exp`], with the
/// same bits where e^x is at least e^[`EXP_NORMAL_MIN`], 0 below it (no subnormal results,
/// which cost microcode assists on some x86 cores), NaN through. Cheaper than `exp` on AVX2:
/// `scale2_normal` adds to the exponent instead of multiplying twice. Positive x: any value.
#[inline(always)]
pub fn exp_nonpositive<S: Simd>(s: S, x: S::F) -> S::F {
    let low = s.splat(EXP_NORMAL_MIN);
    // `max` returns its second operand on NaN, so NaN passes through.
    let (p, n) = exp_parts(s, s.max(low, x));
    s.select(s.lt(x, low), s.zero(), s.scale2_normal(p, n))
}

/// tanh per lane: the odd polynomial below `TANH_CUT`, `1 − 2/(e^{2|x|} + 1)` with the sign
/// of x above it; NaN through.
#[inline(always)]
pub fn tanh<S: Simd>(s: S, v: S::F) -> S::F {
    let one = s.splat(1.0);
    let sign = s.splat(-0.0);
    let a = s.andnot(sign, v);
    let z = s.mul(v, v);
    let p = poly(s, &TANH_P, z);
    let small = s.mul_add(s.mul(p, z), v, v);
    let ac = s.min(s.splat(TANH_LIMIT), a);
    let e = exp(s, s.add(ac, ac));
    let t = s.sub(one, s.div(s.splat(2.0), s.add(e, one)));
    let big = s.or(t, s.and(v, sign));
    s.select(s.lt(a, s.splat(TANH_CUT)), small, big)
}

/// GELU's tanh approximation per lane, `½·v·(1 + tanh(√(2/π)·(v + 0.044715·v³)))`, the
/// products in the order the formula writes them (as generated code computes an exported
/// one: `v³` as `v·v·v`).
#[inline(always)]
pub fn gelu_tanh<S: Simd>(s: S, v: S::F) -> S::F {
    let (half, one) = (s.splat(0.5), s.splat(1.0));
    let cube = s.mul(s.mul(v, v), v);
    let inner = s.add(v, s.mul(s.splat(0.044715), cube));
    let t = tanh(s, s.mul(s.splat(GELU_TANH_SCALE), inner));
    s.mul(s.mul(half, v), s.add(one, t))
}

/// √(2/π), GELU's tanh approximation's scale (as float32).
pub const GELU_TANH_SCALE: f32 = 0.797_884_6;

/// `1 / (1 + e^{−a·v})` per lane.
#[inline(always)]
pub fn sigmoid<S: Simd>(s: S, a: S::F, v: S::F) -> S::F {
    let one = s.splat(1.0);
    let e = exp(s, s.mul(a, s.sub(s.zero(), v)));
    s.div(one, s.add(one, e))
}

/// erf(x) per lane as `x·P(x²)/Q(x²)` over x clamped to ±`ERF_LIMIT` (NaN through).
#[inline(always)]
pub fn erf<S: Simd>(s: S, x: S::F) -> S::F {
    // min/max return their second operand on NaN: a NaN goes through both clamps.
    let xc = s.max(s.splat(-ERF_LIMIT), s.min(s.splat(ERF_LIMIT), x));
    let x2 = s.mul(xc, xc);
    let p = poly(s, &ERF_P, x2);
    let q = poly(s, &ERF_Q, x2);
    let r = s.div(s.mul(xc, p), q);
    // ±1 with x's sign beyond ERF_SATURATES (a NaN compares false and stays NaN).
    let neg0 = s.splat(-0.0);
    let big = s.gt(s.andnot(neg0, x), s.splat(ERF_SATURATES));
    s.select(big, s.or(s.splat(1.0), s.and(x, neg0)), r)
}

/// GELU, exact form: `½·x·(1 + erf(x/√2))` per lane.
#[inline(always)]
pub fn gelu<S: Simd>(s: S, v: S::F) -> S::F {
    let (half, one) = (s.splat(0.5), s.splat(1.0));
    let r2 = s.splat(std::f32::consts::FRAC_1_SQRT_2);
    s.mul(s.mul(half, v), s.add(one, erf(s, s.mul(v, r2))))
}
