//! GELU, exact form: `y = ½·x·(1 + erf(x/√2))` over a float32 buffer (`onnxc_gelu_f32`, the
//! compiler's `Op::Gelu`): a kind of the activation walk (`simd::math::gelu`). erf is
//! `simd::math::erf`, the rational approximation the generated code uses too (x clamped to
//! [-4, 4], erf ≈ x·P(x²)/Q(x²), ±1 beyond `ERF_SATURATES`), with one division per vector
//! where 128-bit generated code spends two per 4 lanes.

use crate::activation::{GELU, activation_f32};
pub use crate::simd::math::{ERF_LIMIT, ERF_P, ERF_Q, ERF_SATURATES};

/// `y[i] = gelu(x[i])` for `i < n`; `x` and `y` may be the same buffer.
///
/// # Safety
/// `x` and `y` hold `n` floats.
pub unsafe fn gelu_f32(x: *const f32, y: *mut f32, n: usize) {
    // SAFETY: forwarded.
    unsafe { activation_f32(GELU, [0.0; 2], x, y, n) }
}

/// C ABI entry point (`kernels::GELU_F32`), over the run's `threads`.
///
/// # Safety
/// As `gelu_f32`; `n ≥ 0`; `threads` as `Par::from_raw`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_gelu_f32(
    x: *const f32,
    y: *mut f32,
    n: i64,
    threads: *const crate::par::Threads,
) {
    // SAFETY: forwarded.
    unsafe {
        crate::activation::activation_par(
            crate::par::Par::from_raw(threads),
            GELU,
            [0.0; 2],
            x,
            y,
            n.max(0) as usize,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::Activation;
    use crate::simd;

    /// Against f64 GELU with a reference erf: every implementation, tails, NaN and +∞.
    #[test]
    fn matches_reference() {
        let mut x: Vec<f32> = (0..1003).map(|i| (i as f32 - 501.0) * 0.0173).collect();
        x.extend([
            f32::NAN,
            f32::INFINITY,
            30.0,
            -30.0,
            0.0,
            -0.0,
            -100.0,
            -1e30,
        ]);
        let mut y = vec![0f32; x.len()];
        let mut ys = Vec::new();
        let w = Activation {
            kind: GELU,
            p: [0.0; 2],
            x: x.as_ptr(),
            y: y.as_mut_ptr(),
            n: x.len(),
        };
        // SAFETY: x and y hold n floats.
        unsafe { simd::for_each_isa(w, |isa, ()| ys.push((isa.to_string(), y.clone()))) };
        for (isa, y) in &ys {
            for (a, b) in x.iter().zip(y) {
                if a.is_nan() {
                    assert!(b.is_nan());
                    continue;
                }
                let v = *a as f64;
                let want = 0.5 * v * (1.0 + crate::erf_f64(v / std::f64::consts::SQRT_2));
                if *a == f32::INFINITY {
                    assert_eq!(*b, f32::INFINITY);
                    continue;
                }
                // Where erf(x/√2) rounds to -1 GELU is -0 exactly, not 6e-8·|x|/2 (an erf an
                // ulp short of -1 made GELU(-1e30) -6e22).
                if *a < -5.55 {
                    assert_eq!(b.to_bits(), (-0.0f32).to_bits(), "{isa} gelu({a}) = {b}");
                    continue;
                }
                let tol = 1e-6 * want.abs() + 2e-6;
                assert!(
                    (*b as f64 - want).abs() <= tol,
                    "{isa} gelu({a}) = {b}, want {want}"
                );
            }
        }
        // In place, as the dispatched kernel computes it out of place.
        // SAFETY: x holds x.len() floats and y as many.
        unsafe { gelu_f32(x.as_ptr(), y.as_mut_ptr(), x.len()) };
        let mut z = x.clone();
        // SAFETY: z holds z.len() floats, used as both input and output.
        unsafe { gelu_f32(z.as_ptr(), z.as_mut_ptr(), z.len()) };
        for (a, b) in z.iter().zip(&y) {
            assert!(a == b || (a.is_nan() && b.is_nan()));
        }
    }
}
