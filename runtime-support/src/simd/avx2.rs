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
    fn splat(self, v: f32) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn load(self, p: *const f32) -> __m256 {
        // SAFETY: AVX2 present; p readable for 8 floats (caller).
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32, v: __m256) {
        // SAFETY: AVX2 present; p writable for 8 floats (caller).
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline(always)]
    fn lanes(self, lo: usize, hi: usize) -> __m256i {
        // SAFETY: AVX2 present (token).
        unsafe {
            let (lo, hi) = (lo.min(8) as i32, hi.min(8) as i32);
            _mm256_andnot_si256(
                _mm256_cmpgt_epi32(_mm256_set1_epi32(lo), iota()),
                _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), iota()),
            )
        }
    }
    #[inline(always)]
    unsafe fn load_masked(self, p: *const f32, m: __m256i, fill: __m256) -> __m256 {
        // SAFETY: AVX2 present; vmaskmovps reads only the lanes in m (caller: readable).
        unsafe { _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m)) }
    }
    #[inline(always)]
    unsafe fn load_or_zero(self, p: *const f32, m: __m256i) -> __m256 {
        // SAFETY: AVX2 present; vmaskmovps reads only the lanes in m (caller: readable) and
        // zeroes the others.
        unsafe { _mm256_maskload_ps(p, m) }
    }
    #[inline(always)]
    unsafe fn store_masked(self, p: *mut f32, m: __m256i, v: __m256) {
        // SAFETY: AVX2 present; vmaskmovps writes only the lanes in m (caller: writable).
        unsafe { _mm256_maskstore_ps(p, m, v) }
    }
    #[inline(always)]
    unsafe fn store_range(self, p: *mut f32, lo: usize, hi: usize, v: __m256) {
        // vmaskmovps stores are microcoded on AMD cores (a dozen cycles or more): lane lo
        // rotated to lane 0, then stores of 4, 2 and 1 floats as the length's bits ask.
        if hi <= lo {
            return;
        }
        debug_assert!(hi <= 8);
        let n = hi - lo;
        // SAFETY: AVX2 present; p[lo..hi] writable (caller), each store within it.
        unsafe {
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
        }
    }
    #[inline(always)]
    unsafe fn gather_masked(
        self,
        p: *const f32,
        stride: isize,
        m: __m256i,
        fill: __m256,
    ) -> __m256 {
        // SAFETY: AVX2 present; a masked gather reads only the lanes in m (caller: readable,
        // offsets fit i32).
        unsafe {
            let idx = _mm256_mullo_epi32(iota(), _mm256_set1_epi32(stride as i32));
            _mm256_mask_i32gather_ps::<4>(fill, p, idx, _mm256_castsi256_ps(m))
        }
    }
    #[inline(always)]
    fn select(self, m: __m256i, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m)) }
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: FMA present (token).
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn neg_mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        // SAFETY: FMA present (token).
        unsafe { _mm256_fnmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn lt(self, a: __m256, b: __m256) -> __m256i {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LT_OQ>(a, b)) }
    }
    #[inline(always)]
    fn gt(self, a: __m256, b: __m256) -> __m256i {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(a, b)) }
    }
    #[inline(always)]
    fn is_nan(self, a: __m256) -> __m256i {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(a, a)) }
    }
    #[inline(always)]
    fn any(self, m: __m256i) -> bool {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_movemask_ps(_mm256_castsi256_ps(m)) != 0 }
    }
    #[inline(always)]
    fn mask_or(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_or_si256(a, b) }
    }
    #[inline(always)]
    fn and(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_and_ps(a, b) }
    }
    #[inline(always)]
    fn or(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_or_ps(a, b) }
    }
    #[inline(always)]
    fn andnot(self, a: __m256, b: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_andnot_ps(a, b) }
    }
    #[inline(always)]
    fn round(self, a: __m256) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a) }
    }
    #[inline(always)]
    fn scale2(self, p: __m256, n: __m256) -> __m256 {
        // Two normal factors 2^⌊n/2⌋ and 2^(n − ⌊n/2⌋) (exponents in [-80, 65]): the product
        // rounds once where it turns subnormal.
        // SAFETY: AVX2 present (token).
        unsafe {
            let ni = _mm256_cvtps_epi32(n);
            let n1 = _mm256_srai_epi32::<1>(ni);
            let n2 = _mm256_sub_epi32(ni, n1);
            let bias = _mm256_set1_epi32(127);
            let f1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
            let f2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
            _mm256_mul_ps(_mm256_mul_ps(p, f1), f2)
        }
    }
    #[inline(always)]
    fn shifter(self, n: usize) -> (__m256i, __m256) {
        // Both halves rotated by n; lanes ≥ 8 − n come from hi.
        // SAFETY: AVX2 present (token).
        unsafe {
            let n = n.min(8) as i32;
            (
                _mm256_and_si256(
                    _mm256_add_epi32(iota(), _mm256_set1_epi32(n)),
                    _mm256_set1_epi32(7),
                ),
                _mm256_castsi256_ps(_mm256_cmpgt_epi32(iota(), _mm256_set1_epi32(7 - n))),
            )
        }
    }
    #[inline(always)]
    fn shift(self, lo: __m256, hi: __m256, (rot, from_hi): (__m256i, __m256)) -> __m256 {
        // SAFETY: AVX2 present (token).
        unsafe {
            _mm256_blendv_ps(
                _mm256_permutevar8x32_ps(lo, rot),
                _mm256_permutevar8x32_ps(hi, rot),
                from_hi,
            )
        }
    }
    #[inline(always)]
    fn deinterleave(self, a: __m256, b: __m256) -> (__m256, __m256) {
        // SAFETY: AVX2 present (token).
        unsafe {
            let e = _mm256_shuffle_ps::<0x88>(a, b); // a0 a2 b0 b2 | a4 a6 b4 b6
            let o = _mm256_shuffle_ps::<0xDD>(a, b);
            (
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(e))),
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(o))),
            )
        }
    }
    #[inline(always)]
    fn interleave(self, a: __m256, b: __m256) -> (__m256, __m256) {
        // SAFETY: AVX2 present (token).
        unsafe {
            let lo4 = _mm256_unpacklo_ps(a, b); // a0 b0 a1 b1 | a4 b4 a5 b5
            let hi4 = _mm256_unpackhi_ps(a, b); // a2 b2 a3 b3 | a6 b6 a7 b7
            (
                _mm256_permute2f128_ps::<0x20>(lo4, hi4),
                _mm256_permute2f128_ps::<0x31>(lo4, hi4),
            )
        }
    }
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
    #[inline(always)]
    fn reduce_add(self, v: __m256) -> f32 {
        // SAFETY: AVX2 present (token).
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
            _mm_cvtss_f32(s)
        }
    }
    #[inline(always)]
    fn reduce_max(self, v: __m256) -> f32 {
        // SAFETY: AVX2 present (token).
        unsafe {
            let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
            _mm_cvtss_f32(m)
        }
    }
}
