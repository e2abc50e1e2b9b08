//! Elementwise activations over float32 buffers, 16 (AVX-512) or 8 (AVX2) lanes at a time
//! (`Kernel::ActivationF32`): those whose vector form is a polynomial and a division per
//! lane — `sigmoid(αx)`, SiLU/Swish `x·sigmoid(αx)` (QuickGELU with α = 1.702), `tanh(x)` —
//! and the hard ones, `clamp(αx + β, 0, 1)` (HardSigmoid) and `x·clamp(αx + β, 0, 1)`
//! (HardSwish), whose NaN-propagating min/max the generated code spends about six
//! instructions each on (MobileNetV3's hard-swish maps ran at 2.3 elements/ns).
//! Generated code is limited to 128-bit vectors and spent about 5 cycles per element on
//! SiLU: a YOLO-style conv+SiLU network on Zen 5 ran at 1.33× onnxruntime's time, a quarter
//! of it in those maps. The compiler calls this for maps that are exactly one of these
//! forms over one contiguous operand (`loops::lower`); anything fused around them stays
//! generated code. Same formulas and constants as `codegen::vmath` (Cephes' expf on the
//! reduced argument, the same tanh split), so results agree with the generated code's to a
//! few ulp; NaN propagates, ±∞ give the limits the formulas give (`x·sigmoid(x)` at −∞ is
//! −∞·0 = NaN, as written).

use crate::softmax::{EXP_POLY, LN2_HI, LN2_LO};

/// `y = sigmoid(α·x) = 1 / (1 + e^{−αx})`.
pub const SIGMOID: i64 = 0;
/// `y = x·sigmoid(α·x)`.
pub const SILU: i64 = 1;
/// `y = tanh(x)` (α unused).
pub const TANH: i64 = 2;
/// `y = max(0, min(1, α·x + β))` (the product and the sum rounded apart, as the generated
/// code computes them; NaN propagates).
pub const HARDSIGMOID: i64 = 3;
/// `y = x·max(0, min(1, α·x + β))`.
pub const HARDSWISH: i64 = 4;

/// tanh's odd polynomial in x² for |x| < `TANH_CUT`, highest degree first.
const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_908_9e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328_2e-1,
];
const TANH_CUT: f32 = 0.625;
/// From 9.010914 on tanh rounds to ±1; clamping |x| at 9.1 keeps `1 − 2/(e^{2|x|} + 1)`
/// exact there (vmath's reason too).
const TANH_LIMIT: f32 = 9.1;
/// e^x overflows above this and is 0 below `EXP_LO` (ln 2^−150).
const EXP_HI: f32 = 88.722_83;
const EXP_LO: f32 = -103.972_08;

fn exp_scalar(x: f32) -> f32 {
    if x > EXP_HI {
        return f32::INFINITY;
    }
    if x < EXP_LO {
        return 0.0;
    }
    x.exp()
}

fn hard(alpha: f32, beta: f32, v: f32) -> f32 {
    let t = alpha * v + beta;
    if t.is_nan() { t } else { t.clamp(0.0, 1.0) }
}

fn scalar(kind: i64, [alpha, beta]: [f32; 2], v: f32) -> f32 {
    match kind {
        SIGMOID => 1.0 / (1.0 + exp_scalar(-alpha * v)),
        SILU => v * (1.0 / (1.0 + exp_scalar(-alpha * v))),
        HARDSIGMOID => hard(alpha, beta, v),
        HARDSWISH => v * hard(alpha, beta, v),
        _ => {
            let a = v.abs();
            if a < TANH_CUT {
                let z = v * v;
                let p = TANH_P[1..].iter().fold(TANH_P[0], |p, &c| p * z + c);
                v + p * z * v
            } else {
                // NaN: `a` is NaN, the clamp keeps it, the result is NaN.
                let ac = if a > TANH_LIMIT { TANH_LIMIT } else { a };
                let t = 1.0 - 2.0 / (exp_scalar(ac + ac) + 1.0);
                t.copysign(v)
            }
        }
    }
}

/// `y[i] = act(x[i])` for `i < n`; `x` and `y` may be the same buffer. `p` holds α (and β
/// for the hard kinds).
///
/// # Safety
/// `x` and `y` hold `n` floats; `kind` is one of the constants above.
pub unsafe fn activation_f32(kind: i64, p: [f32; 2], x: *const f32, y: *mut f32, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::avx512() {
            // SAFETY: AVX-512 detected; forwarded.
            unsafe { avx512::run(kind, p, x, y, n) };
            return;
        }
        if crate::isa::avx2() {
            // SAFETY: AVX2 and FMA detected; forwarded.
            unsafe { avx2::run(kind, p, x, y, n) };
            return;
        }
    }
    for i in 0..n {
        // SAFETY: i < n.
        unsafe { *y.add(i) = scalar(kind, p, *x.add(i)) };
    }
}

/// C ABI entry point (`Kernel::ActivationF32`): `params` points to `[α, β]`.
///
/// # Safety
/// As `activation_f32`; `params` points to two floats; `n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_activation_f32(
    kind: i64,
    params: *const f32,
    x: *const f32,
    y: *mut f32,
    n: i64,
) {
    // SAFETY: forwarded.
    unsafe { activation_f32(kind, [*params, *params.add(1)], x, y, n.max(0) as usize) }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;
    use std::arch::x86_64::*;

    /// e^x of 16 lanes: the softmax kernel's (clamped to [−110, 89], NaN through, `scalef`
    /// for 2^n with IEEE overflow and gradual underflow).
    use crate::softmax::avx512::exp;

    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    fn act(kind: i64, alpha: __m512, beta: __m512, v: __m512) -> __m512 {
        let one = _mm512_set1_ps(1.0);
        match kind {
            HARDSIGMOID | HARDSWISH => {
                // Constants first: `min`/`max` return their second operand on NaN.
                let t = _mm512_add_ps(_mm512_mul_ps(v, alpha), beta);
                let h = _mm512_max_ps(_mm512_setzero_ps(), _mm512_min_ps(one, t));
                if kind == HARDSWISH {
                    _mm512_mul_ps(v, h)
                } else {
                    h
                }
            }
            SIGMOID | SILU => {
                let e = exp(_mm512_mul_ps(alpha, _mm512_sub_ps(_mm512_setzero_ps(), v)));
                let s = _mm512_div_ps(one, _mm512_add_ps(one, e));
                if kind == SILU { _mm512_mul_ps(v, s) } else { s }
            }
            _ => {
                let sign = _mm512_set1_ps(-0.0);
                let a = _mm512_andnot_ps(sign, v);
                let z = _mm512_mul_ps(v, v);
                let mut p = _mm512_set1_ps(TANH_P[0]);
                for &c in &TANH_P[1..] {
                    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(c));
                }
                let small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), v, v);
                let ac = _mm512_min_ps(_mm512_set1_ps(TANH_LIMIT), a);
                let e = exp(_mm512_add_ps(ac, ac));
                let t = _mm512_sub_ps(
                    one,
                    _mm512_div_ps(_mm512_set1_ps(2.0), _mm512_add_ps(e, one)),
                );
                let big = _mm512_or_ps(t, _mm512_and_ps(v, sign));
                let is_small = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, _mm512_set1_ps(TANH_CUT));
                _mm512_mask_blend_ps(is_small, big, small)
            }
        }
    }

    /// # Safety
    /// As `activation_f32`; AVX-512F and FMA present.
    #[target_feature(enable = "avx512f,avx512dq,fma")]
    pub unsafe fn run(kind: i64, [alpha, beta]: [f32; 2], x: *const f32, y: *mut f32, n: usize) {
        let (al, be) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
        let mut i = 0;
        // SAFETY (both loops): elements below n; the tail is masked.
        unsafe {
            while i + 32 <= n {
                // Two independent vectors per iteration: the division's latency overlaps.
                let v0 = _mm512_loadu_ps(x.add(i));
                let v1 = _mm512_loadu_ps(x.add(i + 16));
                let r0 = act(kind, al, be, v0);
                let r1 = act(kind, al, be, v1);
                _mm512_storeu_ps(y.add(i), r0);
                _mm512_storeu_ps(y.add(i + 16), r1);
                i += 32;
            }
            while i < n {
                let m: __mmask16 = if n - i >= 16 {
                    0xFFFF
                } else {
                    ((1u32 << (n - i)) - 1) as u16
                };
                let v = _mm512_maskz_loadu_ps(m, x.add(i));
                _mm512_mask_storeu_ps(y.add(i), m, act(kind, al, be, v));
                i += 16;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    /// e^x of 8 lanes, as `codegen::vmath::exp`: 2^n applied as two normal factors so a
    /// subnormal result rounds once, ∞ above the range, 0 below it, NaN through.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn exp(x: __m256) -> __m256 {
        let (hi, lo) = (_mm256_set1_ps(EXP_HI), _mm256_set1_ps(EXP_LO));
        let xc = _mm256_max_ps(lo, _mm256_min_ps(hi, x));
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(xc, _mm256_set1_ps(std::f32::consts::LOG2_E)),
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), xc);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
        }
        let r2 = _mm256_mul_ps(r, r);
        let p = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0));
        // n in [−150, 128] (a NaN lane converts to garbage, but p is NaN there).
        let ni = _mm256_cvtps_epi32(n);
        let n1 = _mm256_srai_epi32::<1>(ni);
        let n2 = _mm256_sub_epi32(ni, n1);
        let bias = _mm256_set1_epi32(127);
        let f1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
        let f2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
        let y = _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
        let y = _mm256_blendv_ps(
            y,
            _mm256_set1_ps(f32::INFINITY),
            _mm256_cmp_ps::<_CMP_GT_OQ>(x, hi),
        );
        _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps::<_CMP_LT_OQ>(x, lo))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn act(kind: i64, alpha: __m256, beta: __m256, v: __m256) -> __m256 {
        let one = _mm256_set1_ps(1.0);
        match kind {
            HARDSIGMOID | HARDSWISH => {
                let t = _mm256_add_ps(_mm256_mul_ps(v, alpha), beta);
                let h = _mm256_max_ps(_mm256_setzero_ps(), _mm256_min_ps(one, t));
                if kind == HARDSWISH {
                    _mm256_mul_ps(v, h)
                } else {
                    h
                }
            }
            SIGMOID | SILU => {
                let e = exp(_mm256_mul_ps(alpha, _mm256_sub_ps(_mm256_setzero_ps(), v)));
                let s = _mm256_div_ps(one, _mm256_add_ps(one, e));
                if kind == SILU { _mm256_mul_ps(v, s) } else { s }
            }
            _ => {
                let sign = _mm256_set1_ps(-0.0);
                let a = _mm256_andnot_ps(sign, v);
                let z = _mm256_mul_ps(v, v);
                let mut p = _mm256_set1_ps(TANH_P[0]);
                for &c in &TANH_P[1..] {
                    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(c));
                }
                let small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), v, v);
                let ac = _mm256_min_ps(_mm256_set1_ps(TANH_LIMIT), a);
                let e = exp(_mm256_add_ps(ac, ac));
                let t = _mm256_sub_ps(
                    one,
                    _mm256_div_ps(_mm256_set1_ps(2.0), _mm256_add_ps(e, one)),
                );
                let big = _mm256_or_ps(t, _mm256_and_ps(v, sign));
                let is_small = _mm256_cmp_ps::<_CMP_LT_OQ>(a, _mm256_set1_ps(TANH_CUT));
                _mm256_blendv_ps(big, small, is_small)
            }
        }
    }

    /// # Safety
    /// As `activation_f32`; AVX2 and FMA present.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn run(kind: i64, [alpha, beta]: [f32; 2], x: *const f32, y: *mut f32, n: usize) {
        let (al, be) = (_mm256_set1_ps(alpha), _mm256_set1_ps(beta));
        let mut i = 0;
        // SAFETY (both loops): elements below n; the tail is masked.
        unsafe {
            while i + 8 <= n {
                _mm256_storeu_ps(y.add(i), act(kind, al, be, _mm256_loadu_ps(x.add(i))));
                i += 8;
            }
            if i < n {
                let lanes: [i32; 8] = std::array::from_fn(|l| if i + l < n { -1 } else { 0 });
                let m = _mm256_loadu_si256(lanes.as_ptr().cast());
                let v = _mm256_maskload_ps(x.add(i), m);
                _mm256_maskstore_ps(y.add(i), m, act(kind, al, be, v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In f64, from the float32 product α·x the kernel (and any float32 evaluation) starts
    /// from: its rounding is amplified by e^t's slope, not the kernel's error.
    fn reference(kind: i64, [alpha, beta]: [f32; 2], v: f32) -> f64 {
        let x = v as f64;
        let t = (alpha * v) as f64;
        let s = 1.0 / (1.0 + (-t).exp());
        let h = || ((alpha * v + beta) as f64).clamp(0.0, 1.0);
        match kind {
            SIGMOID => s,
            SILU => x * s,
            HARDSIGMOID => h(),
            HARDSWISH => x * h(),
            _ => x.tanh(),
        }
    }

    /// Against f64 formulas on every ISA path (through the ISA cap in `make test`): a
    /// dense sweep with every tail length, the saturating ranges, and special values.
    #[test]
    fn matches_reference() {
        let mut xs: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) / 150.0).collect();
        xs.extend([
            0.0, -0.0, 1e-30, -1e-30, 0.6249, 0.6251, 9.0, 9.2, -9.2, 50.0, -50.0,
        ]);
        xs.extend([
            88.0, -88.0, 89.0, -89.0, 104.0, -104.0, 1e30, -1e30, 3.0, -3.0, 2.5,
        ]);
        let kinds = [
            (SIGMOID, [1.0f32, 0.0]),
            (SILU, [1.0, 0.0]),
            (SILU, [1.702, 0.0]),
            (TANH, [1.0, 0.0]),
            (HARDSIGMOID, [0.2, 0.5]),
            (HARDSIGMOID, [1.0 / 6.0, 0.5]),
            (HARDSWISH, [1.0 / 6.0, 0.5]),
        ];
        for &(kind, p) in &kinds {
            for n in [xs.len(), 1, 7, 8, 15, 17, 33] {
                let x = &xs[..n];
                let mut y = vec![f32::NAN; n];
                unsafe { activation_f32(kind, p, x.as_ptr(), y.as_mut_ptr(), n) };
                for (i, (&v, &got)) in x.iter().zip(&y).enumerate() {
                    let want = reference(kind, p, v);
                    let err = (got as f64 - want).abs();
                    assert!(
                        err <= 4e-7 * want.abs().max(1e-30) + 1e-37,
                        "kind {kind} {p:?} [{i}] x = {v}: {got} vs {want}"
                    );
                }
            }
            // Special values, as the formulas give them.
            let sp = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
            let mut y = [0f32; 3];
            unsafe { activation_f32(kind, p, sp.as_ptr(), y.as_mut_ptr(), 3) };
            assert!(y[0].is_nan(), "kind {kind}: NaN gives {}", y[0]);
            match kind {
                SIGMOID | HARDSIGMOID => assert_eq!((y[1], y[2]), (1.0, 0.0)),
                SILU => assert!(y[1] == f32::INFINITY && y[2].is_nan(), "{y:?}"),
                HARDSWISH => assert!(y[1] == f32::INFINITY && y[2].is_nan(), "{y:?}"),
                _ => assert_eq!((y[1], y[2]), (1.0, -1.0)),
            }
        }
    }

    /// In place (`x` and `y` the same buffer), as the compiler may call it.
    #[test]
    fn in_place() {
        let mut v: Vec<f32> = (0..100).map(|i| i as f32 / 10.0 - 5.0).collect();
        let want: Vec<f32> = v.iter().map(|&x| scalar(SILU, [1.0, 0.0], x)).collect();
        let p = v.as_mut_ptr();
        unsafe { activation_f32(SILU, [1.0, 0.0], p, p, v.len()) };
        for (g, w) in v.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{g} vs {w}");
        }
    }
}
