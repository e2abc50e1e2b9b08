//! Softmax of f32 rows (the last axis, contiguous) of `s·x` for a positive scale `s` (the
//! `1/√d` of attention scores, folded in by the compiler):
//! `y = exp(s·(x - max(x))) / sum(exp(s·(x - max(x))))` in three passes over a row while it
//! is in L1 — max, exponentials stored and summed,
//! scaling by the reciprocal of the sum. The compiler's decomposition into max, exp, sum and
//! divide steps makes four passes over the whole tensor in 128-bit generated code; in a
//! transformer encoder's attention (4×128 rows of 128) that took ~0.11 ms where this takes
//! a fraction (see ARCHITECTURE.md).
//!
//! Special values follow the definition: a NaN anywhere in a row makes the whole row NaN
//! (through its exponential and the sum), so does +inf (inf − inf); a row of −inf is NaN.

/// Softmax of `scale`·x over `rows` rows of `n` floats; `scale` is positive and finite.
///
/// # Safety
/// `x` and `y` are valid for `rows · n` floats; they may be the same buffer.
pub unsafe fn softmax_f32(x: *const f32, y: *mut f32, rows: usize, n: usize, scale: f32) {
    if n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::avx512() {
            for r in 0..rows {
                // SAFETY: row r of both; AVX-512 checked.
                unsafe { avx512::row(x.add(r * n), y.add(r * n), n, scale) };
            }
            return;
        }
        if crate::isa::avx2() {
            for r in 0..rows {
                // SAFETY: row r of both; AVX2+FMA checked.
                unsafe { avx2::row(x.add(r * n), y.add(r * n), n, scale) };
            }
            return;
        }
    }
    for r in 0..rows {
        // SAFETY: row r of both.
        unsafe { row_portable(x.add(r * n), y.add(r * n), n, scale) };
    }
}

/// # Safety
/// `x`, `y` valid for `n` floats.
unsafe fn row_portable(x: *const f32, y: *mut f32, n: usize, scale: f32) {
    let mut m = f32::NEG_INFINITY;
    for i in 0..n {
        // SAFETY: i < n.
        let v = unsafe { *x.add(i) };
        // NaN propagates: `v > m` is false for NaN, so test it separately.
        if v > m || v.is_nan() {
            m = v;
        }
    }
    // Summed in f64: one serial f32 chain over a long row loses digits.
    let mut s = 0f64;
    for i in 0..n {
        // SAFETY: i < n.
        unsafe {
            let e = ((*x.add(i) - m) * scale).exp();
            *y.add(i) = e;
            s += e as f64;
        }
    }
    let inv = (1.0 / s) as f32;
    for i in 0..n {
        // SAFETY: i < n.
        unsafe { *y.add(i) *= inv };
    }
}

/// Cephes' expf polynomial on the reduced argument (|r| ≤ ln2/2); the compiler's vector
/// math (`codegen::vmath::exp`) reads these constants too.
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

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::{EXP_POLY, LN2_HI, LN2_LO};
    use std::arch::x86_64::*;

    /// exp of 16 lanes. The argument is clamped to [-110, 89] (constants first, so a NaN
    /// passes through `min`/`max` and stays NaN); `scalef` applies 2^n with IEEE overflow to
    /// inf and gradual underflow to denormals and 0, so no range fix-ups are needed.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub fn exp(x: __m512) -> __m512 {
        let xc = _mm512_max_ps(
            _mm512_set1_ps(-110.0),
            _mm512_min_ps(_mm512_set1_ps(89.0), x),
        );
        let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm512_mul_ps(xc, _mm512_set1_ps(std::f32::consts::LOG2_E)),
        );
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), xc);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
        let mut p = _mm512_set1_ps(EXP_POLY[0]);
        for &c in &EXP_POLY[1..] {
            p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
        }
        let r2 = _mm512_mul_ps(r, r);
        let p = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0));
        _mm512_scalef_ps(p, n)
    }

    #[inline]
    fn tail(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }

    /// # Safety
    /// `x`, `y` valid for `n` floats; AVX-512F available.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn row(x: *const f32, y: *mut f32, n: usize, scale: f32) {
        // SAFETY (whole body): every full load/store is below n, tails are masked.
        unsafe {
            // Max, NaN-propagating: `max(acc, v)` returns v when either is NaN, and a NaN
            // accumulator is kept by re-checking below.
            let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
            let mut acc = [ninf; 4];
            let mut nan = 0 as __mmask16;
            let mut i = 0;
            while i + 64 <= n {
                for (j, a) in acc.iter_mut().enumerate() {
                    let v = _mm512_loadu_ps(x.add(i + 16 * j));
                    nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                    *a = _mm512_max_ps(*a, v);
                }
                i += 64;
            }
            while i + 16 <= n {
                let v = _mm512_loadu_ps(x.add(i));
                nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                acc[0] = _mm512_max_ps(acc[0], v);
                i += 16;
            }
            if i < n {
                let v = _mm512_mask_loadu_ps(ninf, tail(n - i), x.add(i));
                nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
                acc[0] = _mm512_max_ps(acc[0], v);
            }
            let a = _mm512_max_ps(_mm512_max_ps(acc[0], acc[1]), _mm512_max_ps(acc[2], acc[3]));
            let m = if nan != 0 {
                f32::NAN
            } else {
                _mm512_reduce_max_ps(a)
            };
            let mv = _mm512_set1_ps(m);
            let sv = _mm512_set1_ps(scale);
            // Exponentials, stored and summed.
            let zero = _mm512_setzero_ps();
            let mut sum = [zero; 4];
            let mut i = 0;
            while i + 64 <= n {
                for (j, s) in sum.iter_mut().enumerate() {
                    let e = exp(_mm512_mul_ps(
                        _mm512_sub_ps(_mm512_loadu_ps(x.add(i + 16 * j)), mv),
                        sv,
                    ));
                    _mm512_storeu_ps(y.add(i + 16 * j), e);
                    *s = _mm512_add_ps(*s, e);
                }
                i += 64;
            }
            while i + 16 <= n {
                let e = exp(_mm512_mul_ps(
                    _mm512_sub_ps(_mm512_loadu_ps(x.add(i)), mv),
                    sv,
                ));
                _mm512_storeu_ps(y.add(i), e);
                sum[0] = _mm512_add_ps(sum[0], e);
                i += 16;
            }
            if i < n {
                let k = tail(n - i);
                let e = exp(_mm512_mul_ps(
                    _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x.add(i)), mv),
                    sv,
                ));
                _mm512_mask_storeu_ps(y.add(i), k, e);
                sum[0] = _mm512_mask_add_ps(sum[0], k, sum[0], e);
            }
            let s = _mm512_add_ps(_mm512_add_ps(sum[0], sum[1]), _mm512_add_ps(sum[2], sum[3]));
            let inv = _mm512_set1_ps(1.0 / _mm512_reduce_add_ps(s));
            let mut i = 0;
            while i + 16 <= n {
                _mm512_storeu_ps(y.add(i), _mm512_mul_ps(_mm512_loadu_ps(y.add(i)), inv));
                i += 16;
            }
            if i < n {
                let k = tail(n - i);
                let v = _mm512_maskz_loadu_ps(k, y.add(i));
                _mm512_mask_storeu_ps(y.add(i), k, _mm512_mul_ps(v, inv));
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{EXP_POLY, LN2_HI, LN2_LO};
    use crate::avx2::first_lanes;
    use std::arch::x86_64::*;

    /// exp of 8 lanes that are ≤ 0, −inf or NaN (softmax's shifted, positively scaled
    /// scores): `exp` without the overflow side; 0 below −87.34.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub fn exp_nonpos(x: __m256) -> __m256 {
        let lo = _mm256_set1_ps(-87.336_55);
        // `max(lo, x)` returns x when x is NaN.
        let xc = _mm256_max_ps(lo, x);
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
        // 2^n for n in [-126, 0].
        let e = _mm256_slli_epi32::<23>(_mm256_add_epi32(
            _mm256_cvtps_epi32(n),
            _mm256_set1_epi32(127),
        ));
        let y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
        _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps::<_CMP_LT_OQ>(x, lo))
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hmax(v: __m256) -> f32 {
        let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
        _mm_cvtss_f32(m)
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }

    /// # Safety
    /// `x`, `y` valid for `n` floats; AVX2 and FMA available.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn row(x: *const f32, y: *mut f32, n: usize, scale: f32) {
        // SAFETY (whole body): full loads/stores below n, the tail masked.
        unsafe {
            let ninf = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut acc = [ninf; 4];
            let mut nan = _mm256_setzero_ps();
            let mut i = 0;
            while i + 32 <= n {
                for (j, a) in acc.iter_mut().enumerate() {
                    let v = _mm256_loadu_ps(x.add(i + 8 * j));
                    nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                    *a = _mm256_max_ps(*a, v);
                }
                i += 32;
            }
            while i + 8 <= n {
                let v = _mm256_loadu_ps(x.add(i));
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                acc[0] = _mm256_max_ps(acc[0], v);
                i += 8;
            }
            let k = first_lanes(n - i);
            if i < n {
                let v = _mm256_blendv_ps(
                    ninf,
                    _mm256_maskload_ps(x.add(i), k),
                    _mm256_castsi256_ps(k),
                );
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
                acc[0] = _mm256_max_ps(acc[0], v);
            }
            let a = _mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3]));
            let m = if _mm256_movemask_ps(nan) != 0 {
                f32::NAN
            } else {
                hmax(a)
            };
            let mv = _mm256_set1_ps(m);
            let sv = _mm256_set1_ps(scale);
            let zero = _mm256_setzero_ps();
            let mut sum = [zero; 4];
            let mut i = 0;
            while i + 32 <= n {
                for (j, s) in sum.iter_mut().enumerate() {
                    let e = exp_nonpos(_mm256_mul_ps(
                        _mm256_sub_ps(_mm256_loadu_ps(x.add(i + 8 * j)), mv),
                        sv,
                    ));
                    _mm256_storeu_ps(y.add(i + 8 * j), e);
                    *s = _mm256_add_ps(*s, e);
                }
                i += 32;
            }
            while i + 8 <= n {
                let e = exp_nonpos(_mm256_mul_ps(
                    _mm256_sub_ps(_mm256_loadu_ps(x.add(i)), mv),
                    sv,
                ));
                _mm256_storeu_ps(y.add(i), e);
                sum[0] = _mm256_add_ps(sum[0], e);
                i += 8;
            }
            if i < n {
                let e = exp_nonpos(_mm256_mul_ps(
                    _mm256_sub_ps(_mm256_maskload_ps(x.add(i), k), mv),
                    sv,
                ));
                _mm256_maskstore_ps(y.add(i), k, e);
                sum[0] = _mm256_add_ps(sum[0], _mm256_and_ps(e, _mm256_castsi256_ps(k)));
            }
            let s = _mm256_add_ps(_mm256_add_ps(sum[0], sum[1]), _mm256_add_ps(sum[2], sum[3]));
            let inv = _mm256_set1_ps(1.0 / hsum(s));
            let mut i = 0;
            while i + 8 <= n {
                _mm256_storeu_ps(y.add(i), _mm256_mul_ps(_mm256_loadu_ps(y.add(i)), inv));
                i += 8;
            }
            if i < n {
                let v = _mm256_maskload_ps(y.add(i), k);
                _mm256_maskstore_ps(y.add(i), k, _mm256_mul_ps(v, inv));
            }
        }
    }
}

/// C ABI entry point: softmax of `scale`·x (`scale` null: 1) over `rows` rows of `n` floats.
///
/// # Safety
/// As `softmax_f32`; `rows` and `n` non-negative, `scale` null or one positive finite float.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn onnxc_softmax_f32(
    x: *const f32,
    y: *mut f32,
    rows: i64,
    n: i64,
    scale: *const f32,
) {
    // SAFETY: scale is null or one float.
    let s = if scale.is_null() {
        1.0
    } else {
        unsafe { *scale }
    };
    // SAFETY: forwarded contract.
    unsafe { softmax_f32(x, y, rows.max(0) as usize, n.max(0) as usize, s) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f64 reference with NumPy's special-value behaviour.
    fn reference(x: &[f32], scale: f32) -> Vec<f32> {
        let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| {
            let v = v as f64;
            if v > m || v.is_nan() || m.is_nan() {
                if m.is_nan() { m } else { v }
            } else {
                m
            }
        });
        let e: Vec<f64> = x
            .iter()
            .map(|&v| ((v as f64 - m) * scale as f64).exp())
            .collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| (v / s) as f32).collect()
    }

    fn check(x: &[f32], n: usize) {
        check_scaled(x, n, 1.0)
    }

    fn check_scaled(x: &[f32], n: usize, scale: f32) {
        let rows = x.len() / n;
        let mut y = vec![0f32; x.len()];
        // SAFETY: rows · n floats each.
        unsafe { softmax_f32(x.as_ptr(), y.as_mut_ptr(), rows, n, scale) };
        for r in 0..rows {
            let want = reference(&x[r * n..(r + 1) * n], scale);
            for (i, (&g, &w)) in y[r * n..(r + 1) * n].iter().zip(&want).enumerate() {
                let ok = if w.is_nan() {
                    g.is_nan()
                } else {
                    (g - w).abs() <= 1e-5 * w.abs() + 1e-30
                };
                assert!(
                    ok,
                    "n={n} scale {scale} row {r} [{i}]: got {g}, want {w} (isa {})",
                    crate::isa::cap()
                );
            }
        }
    }

    fn data(len: usize, seed: u32, scale: f32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * scale
            })
            .collect()
    }

    #[test]
    fn rows_of_every_tail_length() {
        for n in [
            1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 1000,
        ] {
            check(&data(3 * n, n as u32, 20.0), n);
        }
    }

    #[test]
    fn wide_ranges_underflow_to_zero() {
        // Spreads of hundreds: most exponentials underflow (some to denormals).
        for n in [5, 16, 37, 128] {
            check(&data(2 * n, 7 + n as u32, 400.0), n);
        }
        let mut x = vec![0f32; 40];
        x[3] = 120.0;
        x[30] = -1e30;
        check(&x, 40);
    }

    #[test]
    fn special_values() {
        for n in [3, 16, 21, 70] {
            // A NaN, a +inf, all -inf, and a -inf among finite values, each in its own row.
            let mut x = data(4 * n, 3, 4.0);
            x[n / 2] = f32::NAN;
            x[n + n - 1] = f32::INFINITY;
            for v in &mut x[2 * n..3 * n] {
                *v = f32::NEG_INFINITY;
            }
            x[3 * n] = f32::NEG_INFINITY;
            check(&x, n);
        }
    }

    #[test]
    fn scaled_scores() {
        // Attention's 1/√d folded in, a scale above one, and special values under a scale.
        for scale in [0.125f32, 0.036, 3.0] {
            for n in [1, 7, 8, 33, 128, 200] {
                check_scaled(&data(3 * n, 5 + n as u32, 60.0), n, scale);
            }
            let mut x = data(3 * 16, 9, 4.0);
            x[5] = f32::NAN;
            x[16 + 3] = f32::INFINITY;
            x[32] = f32::NEG_INFINITY;
            check_scaled(&x, 16, scale);
        }
    }
}
