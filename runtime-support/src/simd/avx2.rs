//! `Avx2`: [`Simd`](super::Simd) with 256-bit vectors (8 lanes), AVX2 and FMA. Masks are
//! vectors of all-ones / all-zeros lanes (`vmaskmovps` takes them).

use super::Simd;
use std::arch::x86_64::*;

/// AVX2 + FMA, proven present by construction.
#[derive(Copy, Clone, Debug)]
pub struct Avx2(());

impl Avx2 {
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[inline(always)]
    pub unsafe fn new() -> Self {
        Avx2(())
    }
}

/// Lane indices 0..8.
#[inline(always)]
fn iota() -> __m256i {
    // SAFETY: an Avx2 token exists wherever this is reached (only its methods call it).
    unsafe { _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7) }
}

/// 4×4 transposes within both 128-bit halves of `a[0..4]`.
#[inline(always)]
fn transpose4(a: [__m256; 4]) -> [__m256; 4] {
    // SAFETY: an Avx2 token exists wherever this is reached (only its methods call it).
    unsafe {
        let t0 = _mm256_unpacklo_ps(a[0], a[1]);
        let t1 = _mm256_unpackhi_ps(a[0], a[1]);
        let t2 = _mm256_unpacklo_ps(a[2], a[3]);
        let t3 = _mm256_unpackhi_ps(a[2], a[3]);
        [
            _mm256_shuffle_ps::<0x44>(t0, t2),
            _mm256_shuffle_ps::<0xEE>(t0, t2),
            _mm256_shuffle_ps::<0x44>(t1, t3),
            _mm256_shuffle_ps::<0xEE>(t1, t3),
        ]
    }
}

/// Every method: the token proves AVX2 and FMA, which is all the intrinsics need; pointer
/// contracts are the trait's.
// SAFETY: each method keeps the module documentation of `simd` (masked loads and stores are
// `vmaskmovps`, which does not touch masked-off lanes).
unsafe impl Simd for Avx2 {
    const LANES: usize = 8;
    type F = __m256;
    type M = __m256i;
    /// The lane rotation and the lanes taken from `hi`.
    type Shift = (__m256i, __m256);

    #[inline(always)]
    fn split4(self, v: [__m256; 4]) -> [__m256; 4] {
        // Half h of v[i] is tile 2i + h's four columns: a 4×4 transpose within each half puts
        // column c of tile 2i + h in lane 4h + i.
        transpose4(v)
    }
    #[inline(always)]
    fn join4(self, c: [__m256; 4]) -> [__m256; 4] {
        // The transpose within halves is its own inverse.
        transpose4(c)
    }

    intrinsics! {
        unsafe load(p: *const f32) -> __m256 = _mm256_loadu_ps(p);
        unsafe store(p: *mut f32, v: __m256) = _mm256_storeu_ps(p, v);
        // vmaskmovps reads and writes only the lanes in m (loads zero the others).
        unsafe load_masked(p: *const f32, m: __m256i, fill: __m256) -> __m256 =
            _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
        unsafe load_or_zero(p: *const f32, m: __m256i) -> __m256 = _mm256_maskload_ps(p, m);
        unsafe store_masked(p: *mut f32, m: __m256i, v: __m256) = _mm256_maskstore_ps(p, m, v);
        unsafe store_range(p: *mut f32, lo: usize, hi: usize, v: __m256) = {
            // vmaskmovps stores are microcoded on AMD cores (a dozen cycles or more): lane lo
            // rotated to lane 0, then stores of 4, 2 and 1 floats as the length's bits ask,
            // each within p[lo..hi].
            if hi <= lo {
                return;
            }
            debug_assert!(hi <= 8);
            let n = hi - lo;
            if n == 8 {
                _mm256_storeu_ps(p, v);
                return;
            }
            let v = if lo == 0 {
                v
            } else {
                _mm256_permutevar8x32_ps(v, _mm256_add_epi32(iota(), _mm256_set1_epi32(lo as i32)))
            };
            let (mut q, mut x) = (p.add(lo), _mm256_castps256_ps128(v));
            if n & 4 != 0 {
                _mm_storeu_ps(q, x);
                (q, x) = (q.add(4), _mm256_extractf128_ps::<1>(v));
            }
            if n & 2 != 0 {
                _mm_store_sd(q.cast(), _mm_castps_pd(x));
                (q, x) = (q.add(2), _mm_movehl_ps(x, x));
            }
            if n & 1 != 0 {
                _mm_store_ss(q, x);
            }
        };
        // A masked gather reads only the lanes in m.
        unsafe gather_masked(p: *const f32, stride: isize, m: __m256i, fill: __m256) -> __m256 = {
            let idx = _mm256_mullo_epi32(iota(), _mm256_set1_epi32(stride as i32));
            _mm256_mask_i32gather_ps::<4>(fill, p, idx, _mm256_castsi256_ps(m))
        };
        unsafe gather_index(p: *const f32, idx: *const i32, m: __m256i, fill: __m256) -> __m256 = {
            let i = _mm256_maskload_epi32(idx, m);
            _mm256_mask_i32gather_ps::<4>(fill, p, i, _mm256_castsi256_ps(m))
        };
        prefetch(p: *const f32) -> () = _mm_prefetch::<_MM_HINT_T0>(p.cast());
        splat(v: f32) -> __m256 = _mm256_set1_ps(v);
        lanes(lo: usize, hi: usize) -> __m256i = {
            let (lo, hi) = (lo.min(8) as i32, hi.min(8) as i32);
            _mm256_andnot_si256(
                _mm256_cmpgt_epi32(_mm256_set1_epi32(lo), iota()),
                _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), iota()),
            )
        };
        select(m: __m256i, a: __m256, b: __m256) -> __m256 =
            _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m));
        binary __m256: add _mm256_add_ps, sub _mm256_sub_ps, mul _mm256_mul_ps,
            div _mm256_div_ps, min _mm256_min_ps, max _mm256_max_ps, and _mm256_and_ps,
            or _mm256_or_ps, andnot _mm256_andnot_ps;
        mul_add(a: __m256, b: __m256, c: __m256) -> __m256 = _mm256_fmadd_ps(a, b, c);
        neg_mul_add(a: __m256, b: __m256, c: __m256) -> __m256 = _mm256_fnmadd_ps(a, b, c);
        lt(a: __m256, b: __m256) -> __m256i =
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LT_OQ>(a, b));
        gt(a: __m256, b: __m256) -> __m256i =
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(a, b));
        is_nan(a: __m256) -> __m256i = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(a, a));
        any(m: __m256i) -> bool = _mm256_movemask_ps(_mm256_castsi256_ps(m)) != 0;
        mask_or(a: __m256i, b: __m256i) -> __m256i = _mm256_or_si256(a, b);
        round(a: __m256) -> __m256 =
            _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a);
        scale2(p: __m256, n: __m256) -> __m256 = {
            // Two normal factors 2^⌊n/2⌋ and 2^(n − ⌊n/2⌋) (exponents in [-80, 65]): the
            // product rounds once where it turns subnormal.
            let ni = _mm256_cvtps_epi32(n);
            let n1 = _mm256_srai_epi32::<1>(ni);
            let n2 = _mm256_sub_epi32(ni, n1);
            let bias = _mm256_set1_epi32(127);
            let f1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
            let f2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
            _mm256_mul_ps(_mm256_mul_ps(p, f1), f2)
        };
        scale2_normal(p: __m256, n: __m256) -> __m256 = _mm256_castsi256_ps(_mm256_add_epi32(
            _mm256_castps_si256(p),
            _mm256_slli_epi32::<23>(_mm256_cvtps_epi32(n)),
        ));
        shifter(n: usize) -> (__m256i, __m256) = {
            // Both halves rotated by n; lanes ≥ 8 − n come from hi.
            let n = n.min(8) as i32;
            (
                _mm256_and_si256(
                    _mm256_add_epi32(iota(), _mm256_set1_epi32(n)),
                    _mm256_set1_epi32(7),
                ),
                _mm256_castsi256_ps(_mm256_cmpgt_epi32(iota(), _mm256_set1_epi32(7 - n))),
            )
        };
        shift(lo: __m256, hi: __m256, sh: (__m256i, __m256)) -> __m256 = {
            let (rot, from_hi) = sh;
            _mm256_blendv_ps(
                _mm256_permutevar8x32_ps(lo, rot),
                _mm256_permutevar8x32_ps(hi, rot),
                from_hi,
            )
        };
        deinterleave(a: __m256, b: __m256) -> (__m256, __m256) = {
            let e = _mm256_shuffle_ps::<0x88>(a, b); // a0 a2 b0 b2 | a4 a6 b4 b6
            let o = _mm256_shuffle_ps::<0xDD>(a, b);
            (
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(e))),
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(o))),
            )
        };
        interleave(a: __m256, b: __m256) -> (__m256, __m256) = {
            let lo4 = _mm256_unpacklo_ps(a, b); // a0 b0 a1 b1 | a4 b4 a5 b5
            let hi4 = _mm256_unpackhi_ps(a, b); // a2 b2 a3 b3 | a6 b6 a7 b7
            (
                _mm256_permute2f128_ps::<0x20>(lo4, hi4),
                _mm256_permute2f128_ps::<0x31>(lo4, hi4),
            )
        };
        reduce_add(v: __m256) -> f32 = {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
            _mm_cvtss_f32(s)
        };
        reduce_max(v: __m256) -> f32 = {
            let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
            _mm_cvtss_f32(m)
        };
    }
}
