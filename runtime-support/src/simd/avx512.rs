//! `Avx512`: [`Simd`](super::Simd) with 512-bit vectors (16 lanes), AVX-512 F/BW/DQ/VL and
//! FMA. Masks are `__mmask16` bit sets; masked loads, stores and gathers do not touch (or
//! fault on) the lanes outside their mask.

use super::Simd;
use std::arch::x86_64::*;

/// AVX-512 F/BW/DQ/VL + FMA, proven present by construction.
#[derive(Copy, Clone, Debug)]
pub struct Avx512(());

impl Avx512 {
    /// # Safety
    /// The CPU has AVX-512 F, BW, DQ, VL and FMA.
    #[inline(always)]
    pub unsafe fn new() -> Self {
        Avx512(())
    }
}

/// Lane indices 0..16.
#[inline(always)]
fn iota() -> __m512i {
    // SAFETY: an Avx512 token exists wherever this is reached (only its methods call it).
    unsafe { _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) }
}

/// Every method: the token proves the features, which is all the intrinsics need; pointer
/// contracts are the trait's.
// SAFETY: each method keeps the module documentation of `simd`.
unsafe impl Simd for Avx512 {
    const LANES: usize = 16;
    type F = __m512;
    type M = __mmask16;
    /// The permute's indices into `lo | hi`.
    type Shift = __m512i;

    #[inline(always)]
    fn lanes(self, lo: usize, hi: usize) -> __mmask16 {
        let (lo, hi) = (lo.min(16), hi.min(16));
        (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16
    }
    #[inline(always)]
    fn any(self, m: __mmask16) -> bool {
        m != 0
    }
    #[inline(always)]
    fn mask_or(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }

    intrinsics! {
        unsafe load(p: *const f32) -> __m512 = _mm512_loadu_ps(p);
        unsafe store(p: *mut f32, v: __m512) = _mm512_storeu_ps(p, v);
        // Masked loads, stores and gathers do not access the lanes outside their mask.
        unsafe load_masked(p: *const f32, m: __mmask16, fill: __m512) -> __m512 =
            _mm512_mask_loadu_ps(fill, m, p);
        unsafe store_masked(p: *mut f32, m: __mmask16, v: __m512) =
            _mm512_mask_storeu_ps(p, m, v);
        unsafe gather_masked(p: *const f32, stride: isize, m: __mmask16, fill: __m512) -> __m512 =
            _mm512_mask_i32gather_ps::<4>(
                fill,
                m,
                _mm512_mullo_epi32(iota(), _mm512_set1_epi32(stride as i32)),
                p,
            );
        unsafe gather_index(p: *const f32, idx: *const i32, m: __mmask16, fill: __m512) -> __m512 =
            _mm512_mask_i32gather_ps::<4>(
                fill,
                m,
                _mm512_maskz_loadu_epi32(m, idx),
                p,
            );
        prefetch(p: *const f32) -> () = _mm_prefetch::<_MM_HINT_T0>(p.cast());
        splat(v: f32) -> __m512 = _mm512_set1_ps(v);
        select(m: __mmask16, a: __m512, b: __m512) -> __m512 = _mm512_mask_blend_ps(m, b, a);
        binary __m512: add _mm512_add_ps, sub _mm512_sub_ps, mul _mm512_mul_ps,
            div _mm512_div_ps, min _mm512_min_ps, max _mm512_max_ps, and _mm512_and_ps,
            or _mm512_or_ps, andnot _mm512_andnot_ps;
        mul_add(a: __m512, b: __m512, c: __m512) -> __m512 = _mm512_fmadd_ps(a, b, c);
        neg_mul_add(a: __m512, b: __m512, c: __m512) -> __m512 = _mm512_fnmadd_ps(a, b, c);
        lt(a: __m512, b: __m512) -> __mmask16 = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b);
        gt(a: __m512, b: __m512) -> __mmask16 = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b);
        is_nan(a: __m512) -> __mmask16 = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a);
        round(a: __m512) -> __m512 =
            _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a);
        // vscalefps: p·2^n with IEEE overflow and gradual underflow, one rounding.
        scale2(p: __m512, n: __m512) -> __m512 = _mm512_scalef_ps(p, n);
        shifter(n: usize) -> __m512i =
            _mm512_add_epi32(iota(), _mm512_set1_epi32(n.min(16) as i32));
        shift(lo: __m512, hi: __m512, idx: __m512i) -> __m512 =
            _mm512_permutex2var_ps(lo, idx, hi);
        deinterleave(a: __m512, b: __m512) -> (__m512, __m512) = {
            let even = _mm512_add_epi32(iota(), iota());
            let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
            (
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            )
        };
        interleave(a: __m512, b: __m512) -> (__m512, __m512) = {
            let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            let hi =
                _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            (
                _mm512_permutex2var_ps(a, lo, b),
                _mm512_permutex2var_ps(a, hi, b),
            )
        };
        reduce_add(a: __m512) -> f32 = _mm512_reduce_add_ps(a);
        reduce_max(a: __m512) -> f32 = _mm512_reduce_max_ps(a);
    }
}
