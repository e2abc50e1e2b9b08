//! The quantized epilogue's rounding in float32 lanes, bit for bit the float64 reference.
//!
//! The reference requantizes a corrected int32 sum `v` with a float32 scale `s` as
//! `clamp(round_half_even(f64(v) · f64(s)), lo, hi)` (`kernel::epilogue_scalar`). Doing that in
//! float64 takes two vectors of half the lanes, with their conversions; float32 takes one.
//! The float32 result is the same whenever:
//!
//! - `|v| < 2^24`, so `f32(v)` is exact; and
//! - the rounded product `p = fl32(v · s)`, clamped to `[lo, hi]`, is not a tie (its distance
//!   to the nearest integer is not exactly 1/2).
//!
//! Why: rounding to float32 is monotone and every half-integer `k + 1/2` with `|k| < 2^22`
//! is a float32, so the exact product `x = v · s` and `p` cannot lie on different sides of
//! a half-integer unless `p` lands on it; then both round to the same integer. The
//! clamp bounds are integers, so clamping before or after rounding is the same, and `p`
//! beyond a bound means `x` is beyond it too. Lanes that break either condition, which
//! real data rarely has, are redone in float64 as the reference does. The sums' bound is
//! usually known when the weights are packed (`small_sums`), so the check per vector is one
//! compare for ties and a branch that is almost never taken.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Magnitudes from which an int32 no longer converts to float32 exactly.
const EXACT_F32: i32 = 1 << 24;

/// A call's requantization bounds, as float32 and float64 lanes, and its output zero point.
#[cfg(target_arch = "x86_64")]
#[derive(Copy, Clone)]
pub(super) struct Bounds512 {
    lo: __m512,
    hi: __m512,
    lo_d: __m512d,
    hi_d: __m512d,
    zp: __m512i,
    /// Some sum may reach 2^24 in magnitude: check each vector.
    check_sums: bool,
}

#[cfg(target_arch = "x86_64")]
impl Bounds512 {
    /// The bounds of outputs in `[lo, hi]` with zero point `zp` (as `QScalars` holds them);
    /// `small_sums`: every sum is known to stay below 2^24 in magnitude.
    ///
    /// # Safety
    /// The CPU has AVX-512 F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn new(lo: i32, hi: i32, zp: i32, small_sums: bool) -> Bounds512 {
        // Integers in [-383, 383]: exact in both types.
        Bounds512 {
            lo: _mm512_set1_ps((lo - zp) as f32),
            hi: _mm512_set1_ps((hi - zp) as f32),
            lo_d: _mm512_set1_pd((lo - zp) as f64),
            hi_d: _mm512_set1_pd((hi - zp) as f64),
            zp: _mm512_set1_epi32(zp),
            check_sums: !small_sums,
        }
    }
}

/// Sixteen corrected sums `v` requantized with the lanes' scales `s`: the outputs, zero point
/// added, as int32 lanes in `[lo, hi]`.
///
/// # Safety
/// The CPU has AVX-512 F, BW, DQ and VL.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
pub(super) unsafe fn requantize16(v: __m512i, s: __m512, b: &Bounds512) -> __m512i {
    let p = _mm512_mul_ps(_mm512_cvtepi32_ps(v), s);
    // max then min with the bound second: a NaN product clamps to `lo`, as in float64.
    let p = _mm512_min_ps(_mm512_max_ps(p, b.lo), b.hi);
    // p − round(p) (vreduceps, rounding to nearest, no fraction bits kept).
    let frac = _mm512_reduce_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(p);
    let tie = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(frac), _mm512_set1_ps(0.5));
    // |i32::MIN| wraps to itself, which is at least 2^24 unsigned.
    let wide = if b.check_sums {
        _mm512_cmpge_epu32_mask(_mm512_abs_epi32(v), _mm512_set1_epi32(EXACT_F32))
    } else {
        0
    };
    let r = if tie | wide == 0 {
        _mm512_cvtps_epi32(p)
    } else {
        // SAFETY: the CPU has the features of this function.
        unsafe { requantize16_f64(v, s, b) }
    };
    _mm512_add_epi32(r, b.zp)
}

/// `requantize16` in float64, as the reference computes it (without the zero point).
///
/// # Safety
/// The CPU has AVX-512 F and DQ.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn requantize16_f64(v: __m512i, s: __m512, b: &Bounds512) -> __m512i {
    // The conversion rounds to nearest, ties to even (the default mode), as the scalar
    // epilogue's ROUND addition does.
    let half = |x: __m256i, s: __m256| {
        let f = _mm512_mul_pd(_mm512_cvtepi32_pd(x), _mm512_cvtps_pd(s));
        _mm512_cvtpd_epi32(_mm512_min_pd(_mm512_max_pd(f, b.lo_d), b.hi_d))
    };
    let a = half(_mm512_castsi512_si256(v), _mm512_castps512_ps256(s));
    let c = half(
        _mm512_extracti64x4_epi64::<1>(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s))),
    );
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), c)
}

/// Eight lanes of `requantize16` for the AVX2 tier: the same conditions, the same bits.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn requantize8(
    v: __m256i,
    s: __m256,
    lo: i32,
    hi: i32,
    zp: i32,
    small_sums: bool,
) -> __m256i {
    let (lo_f, hi_f) = (
        _mm256_set1_ps((lo - zp) as f32),
        _mm256_set1_ps((hi - zp) as f32),
    );
    let p = _mm256_mul_ps(_mm256_cvtepi32_ps(v), s);
    let p = _mm256_min_ps(_mm256_max_ps(p, lo_f), hi_f);
    let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(p);
    let d = _mm256_andnot_ps(_mm256_set1_ps(-0.0), _mm256_sub_ps(p, r));
    let tie = _mm256_cmp_ps::<_CMP_EQ_OQ>(d, _mm256_set1_ps(0.5));
    // |i32::MIN| stays negative, but -2^31 converts exactly.
    let wide = if small_sums {
        _mm256_setzero_si256()
    } else {
        _mm256_cmpgt_epi32(_mm256_abs_epi32(v), _mm256_set1_epi32(EXACT_F32 - 1))
    };
    let r = if _mm256_movemask_ps(_mm256_or_ps(tie, _mm256_castsi256_ps(wide))) == 0 {
        _mm256_cvtps_epi32(r)
    } else {
        // SAFETY: the CPU has AVX2.
        unsafe { requantize8_f64(v, s, lo - zp, hi - zp) }
    };
    _mm256_add_epi32(r, _mm256_set1_epi32(zp))
}

/// `requantize8` in float64, as the reference computes it (without the zero point).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
#[target_feature(enable = "avx2")]
unsafe fn requantize8_f64(v: __m256i, s: __m256, lo: i32, hi: i32) -> __m256i {
    let (lo, hi) = (_mm256_set1_pd(lo as f64), _mm256_set1_pd(hi as f64));
    let half = |x: __m128i, s: __m128| {
        let f = _mm256_mul_pd(_mm256_cvtepi32_pd(x), _mm256_cvtps_pd(s));
        _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(f, lo), hi))
    };
    let a = half(_mm256_castsi256_si128(v), _mm256_castps256_ps128(s));
    let c = half(
        _mm256_extracti128_si256::<1>(v),
        _mm256_extractf128_ps::<1>(s),
    );
    _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(a), c)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The reference: `kernel::epilogue_scalar`'s arithmetic for one lane.
    fn reference(v: i32, s: f32, lo: i32, hi: i32, zp: i32) -> i32 {
        const ROUND: f64 = 6_755_399_441_055_744.0;
        let f = (v as f64 * s as f64)
            .max((lo - zp) as f64)
            .min((hi - zp) as f64);
        ((f + ROUND) - ROUND) as i32 + zp
    }

    /// Sums and scales that hit every path: exact ties (odd sums times powers of two and
    /// halves), products whose float32 rounding lands on a tie, sums past 2^24, the int32
    /// extremes, scales that overflow or vanish, and plain random ones.
    fn cases() -> Vec<(i32, f32)> {
        let mut out = Vec::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let scales = [
            0.5f32,
            0.25,
            1.5,
            1.0 / 3.0,
            0.1,
            3.0e-3,
            1.0e-7,
            f32::MIN_POSITIVE,
            1.0e30,
            f32::INFINITY,
            f32::NAN,
        ];
        for &s in &scales {
            for v in [-5, -3, -1, 0, 1, 3, 5, 255, 257, -257] {
                out.push((v, s));
            }
            for v in [
                EXACT_F32 - 1,
                EXACT_F32,
                EXACT_F32 + 1,
                -EXACT_F32 - 3,
                i32::MAX,
                i32::MIN,
            ] {
                out.push((v, s));
            }
        }
        // Products near half-integers: v · s = k + 1/2 ± an ulp or two.
        for _ in 0..4000 {
            let v = (next() % 20_000) as i32 - 10_000;
            if v == 0 {
                continue;
            }
            let k = (next() % 300) as i32 - 150;
            let target = k as f64 + 0.5;
            let s0 = (target / v as f64) as f32;
            for d in -2i32..=2 {
                let s = f32::from_bits((s0.to_bits() as i32 + d) as u32);
                out.push((v, s));
            }
        }
        for _ in 0..20_000 {
            let v = next() as i32 >> (next() % 32);
            let s = f32::from_bits(0x3000_0000 + (next() % 0x0f00_0000) as u32);
            out.push((v, s));
        }
        out
    }

    const BOUNDS: [(i32, i32, i32); 4] = [(0, 255, 128), (-128, 127, 0), (0, 255, 0), (3, 200, 7)];

    /// Runs `lanes(v, s, lo, hi, zp, small)` on every case, `N` lanes at a time, against the
    /// reference; `small`: every sum of the vector is below 2^24, so the magnitude check may
    /// be skipped (as `small_sums` blobs do).
    fn check_lanes<const N: usize>(
        lanes: impl Fn(&[i32; N], &[f32; N], i32, i32, i32, bool) -> [i32; N],
    ) {
        let cases = cases();
        for (lo, hi, zp) in BOUNDS {
            for chunk in cases.chunks(N) {
                let mut v = [0i32; N];
                let mut s = [1.0f32; N];
                for (l, &(cv, cs)) in chunk.iter().enumerate() {
                    (v[l], s[l]) = (cv, cs);
                }
                let small = v.iter().all(|x| x.unsigned_abs() < EXACT_F32 as u32);
                let got = lanes(&v, &s, lo, hi, zp, small);
                for l in 0..N {
                    assert_eq!(
                        got[l],
                        reference(v[l], s[l], lo, hi, zp),
                        "{N} lanes: v = {}, s = {:e}, bounds {lo}..{hi}, zp {zp}",
                        v[l],
                        s[l]
                    );
                }
            }
        }
    }

    #[test]
    fn avx512_lanes_are_the_float64_reference() {
        if !crate::isa::avx512() {
            return;
        }
        check_lanes::<16>(|v, s, lo, hi, zp, small| {
            let mut got = [0i32; 16];
            // SAFETY: the CPU has AVX-512 (checked); the arrays hold 16 lanes.
            unsafe {
                let b = Bounds512::new(lo, hi, zp, small);
                let r = requantize16(
                    _mm512_loadu_si512(v.as_ptr() as *const _),
                    _mm512_loadu_ps(s.as_ptr()),
                    &b,
                );
                _mm512_storeu_si512(got.as_mut_ptr() as *mut _, r);
            }
            got
        });
    }

    #[test]
    fn avx2_lanes_are_the_float64_reference() {
        if !crate::isa::avx2() {
            return;
        }
        check_lanes::<8>(|v, s, lo, hi, zp, small| {
            let mut got = [0i32; 8];
            // SAFETY: the CPU has AVX2 (checked); the arrays hold 8 lanes.
            unsafe {
                let r = requantize8(
                    _mm256_loadu_si256(v.as_ptr() as *const _),
                    _mm256_loadu_ps(s.as_ptr()),
                    lo,
                    hi,
                    zp,
                    small,
                );
                _mm256_storeu_si256(got.as_mut_ptr() as *mut _, r);
            }
            got
        });
    }
}
