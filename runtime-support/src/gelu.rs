//! GELU, exact form: `y = ½·x·(1 + erf(x/√2))` over a float32 buffer, as a runtime kernel
//! (the compiler's `Op::Gelu`). Generated code is limited to 128-bit vectors and spends two
//! divisions per 4 lanes on it (x/√2 and erf's rational form); this runs 16 (AVX-512) or 8
//! (AVX2) lanes with one division. erf is the rational approximation the generated code
//! uses (`compiler/src/codegen/vmath.rs` reads the coefficients from here): x clamped to
//! [-4, 4], erf ≈ x·P(x²)/Q(x²).

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

/// erf as the kernels compute it (scalar).
fn erf(x: f32) -> f32 {
    // NaN passes both clamps (comparisons with NaN are false).
    let xc = if x > ERF_LIMIT { ERF_LIMIT } else { x };
    let xc = if xc < -ERF_LIMIT { -ERF_LIMIT } else { xc };
    let x2 = xc * xc;
    let p = ERF_P[1..].iter().fold(ERF_P[0], |p, &c| p * x2 + c);
    let q = ERF_Q[1..].iter().fold(ERF_Q[0], |q, &c| q * x2 + c);
    xc * p / q
}

/// `y[i] = gelu(x[i])` for `i < n`; `x` and `y` may be the same buffer.
///
/// # Safety
/// `x` and `y` hold `n` floats.
pub unsafe fn gelu_f32(x: *const f32, y: *mut f32, n: usize) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::isa::avx512() {
        // SAFETY: AVX-512 detected; forwarded.
        i = unsafe { avx512(x, y, n) };
    } else if crate::isa::avx2() {
        // SAFETY: AVX2 and FMA detected; forwarded.
        i = unsafe { avx2(x, y, n) };
    }
    while i < n {
        // SAFETY: i < n.
        unsafe {
            let v = *x.add(i);
            *y.add(i) = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
        }
        i += 1;
    }
}

/// C ABI entry point (`Kernel::GeluF32`).
///
/// # Safety
/// As `gelu_f32`; `n ≥ 0`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_gelu_f32(x: *const f32, y: *mut f32, n: i64) {
    // SAFETY: forwarded.
    unsafe { gelu_f32(x, y, n.max(0) as usize) }
}

/// Whole 16-float vectors; returns how many elements it did.
///
/// # Safety
/// As `gelu_f32`; AVX-512F and FMA present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn avx512(x: *const f32, y: *mut f32, n: usize) -> usize {
    use std::arch::x86_64::*;
    let (lim, nlim) = (_mm512_set1_ps(ERF_LIMIT), _mm512_set1_ps(-ERF_LIMIT));
    let (half, one) = (_mm512_set1_ps(0.5), _mm512_set1_ps(1.0));
    let r2 = _mm512_set1_ps(std::f32::consts::FRAC_1_SQRT_2);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: elements i..i+16 of x and y.
        unsafe {
            let v = _mm512_loadu_ps(x.add(i));
            // min/max return their second operand on NaN: a NaN goes through both clamps.
            let xc = _mm512_max_ps(nlim, _mm512_min_ps(lim, _mm512_mul_ps(v, r2)));
            let x2 = _mm512_mul_ps(xc, xc);
            let mut p = _mm512_set1_ps(ERF_P[0]);
            for &c in &ERF_P[1..] {
                p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(c));
            }
            let mut q = _mm512_set1_ps(ERF_Q[0]);
            for &c in &ERF_Q[1..] {
                q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(c));
            }
            let e = _mm512_div_ps(_mm512_mul_ps(xc, p), q);
            let r = _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e));
            _mm512_storeu_ps(y.add(i), r);
        }
        i += 16;
    }
    i
}

/// Whole 8-float vectors; returns how many elements it did.
///
/// # Safety
/// As `gelu_f32`; AVX2 and FMA present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2(x: *const f32, y: *mut f32, n: usize) -> usize {
    use std::arch::x86_64::*;
    let (lim, nlim) = (_mm256_set1_ps(ERF_LIMIT), _mm256_set1_ps(-ERF_LIMIT));
    let (half, one) = (_mm256_set1_ps(0.5), _mm256_set1_ps(1.0));
    let r2 = _mm256_set1_ps(std::f32::consts::FRAC_1_SQRT_2);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: elements i..i+8 of x and y.
        unsafe {
            let v = _mm256_loadu_ps(x.add(i));
            let xc = _mm256_max_ps(nlim, _mm256_min_ps(lim, _mm256_mul_ps(v, r2)));
            let x2 = _mm256_mul_ps(xc, xc);
            let mut p = _mm256_set1_ps(ERF_P[0]);
            for &c in &ERF_P[1..] {
                p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(c));
            }
            let mut q = _mm256_set1_ps(ERF_Q[0]);
            for &c in &ERF_Q[1..] {
                q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(c));
            }
            let e = _mm256_div_ps(_mm256_mul_ps(xc, p), q);
            let r = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e));
            _mm256_storeu_ps(y.add(i), r);
        }
        i += 8;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against f64 GELU with a reference erf: every ISA path (through the ISA cap in `make
    /// test`), tails, NaN and +∞.
    #[test]
    fn matches_reference() {
        let mut x: Vec<f32> = (0..1003).map(|i| (i as f32 - 501.0) * 0.0173).collect();
        x.extend([f32::NAN, f32::INFINITY, 30.0, -30.0, 0.0, -0.0]);
        let mut y = vec![0f32; x.len()];
        unsafe { gelu_f32(x.as_ptr(), y.as_mut_ptr(), x.len()) };
        for (a, b) in x.iter().zip(&y) {
            if a.is_nan() {
                assert!(b.is_nan());
                continue;
            }
            let v = *a as f64;
            let want = 0.5 * v * (1.0 + libm_erf(v / std::f64::consts::SQRT_2));
            if *a == f32::INFINITY {
                assert_eq!(*b, f32::INFINITY);
                continue;
            }
            // erf saturates at 1 - 6e-8 (its argument is clamped to ±4), as in the generated
            // code: large negative x keep a residue of about 6e-8·|x|/2.
            let tol = 1e-6 * want.abs() + 2e-6;
            assert!(
                (*b as f64 - want).abs() <= tol,
                "gelu({a}) = {b}, want {want}"
            );
        }
        // In place.
        let mut z = x.clone();
        unsafe { gelu_f32(z.as_ptr(), z.as_mut_ptr(), z.len()) };
        for (a, b) in z.iter().zip(&y) {
            assert!(a == b || (a.is_nan() && b.is_nan()));
        }
    }

    /// erf in f64: Taylor series below 3, erfc's continued fraction above.
    fn libm_erf(x: f64) -> f64 {
        if x.is_infinite() {
            return x.signum();
        }
        let t = x.abs();
        let r = if t < 3.0 {
            // Taylor series: erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)).
            let mut sum = 0.0;
            let mut term = t;
            let mut n = 0.0;
            while term.abs() > 1e-17 {
                sum += term / (2.0 * n + 1.0);
                n += 1.0;
                term *= -t * t / n;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // Continued fraction for erfc.
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (t + f);
            }
            1.0 - (-t * t).exp() / (std::f64::consts::PI.sqrt() * (t + f))
        };
        r.copysign(x)
    }
}
