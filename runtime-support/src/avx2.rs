//! 256-bit helpers shared by the AVX2 kernels (GEMM tiles, Winograd transforms, im2col
//! packing, depthwise conv, pooling).

use std::arch::x86_64::*;

/// Lane mask for the first `n` of 8 lanes (`n` may exceed 8 or be 0).
#[inline]
#[target_feature(enable = "avx2")]
pub fn first_lanes(n: usize) -> __m256i {
    let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n.min(8) as i32), idx)
}

/// Even and odd lanes of the 16 floats in `a | b`, each in order.
#[inline]
#[target_feature(enable = "avx2")]
pub fn deinterleave(a: __m256, b: __m256) -> (__m256, __m256) {
    let e = _mm256_shuffle_ps::<0x88>(a, b); // a0 a2 b0 b2 | a4 a6 b4 b6
    let o = _mm256_shuffle_ps::<0xDD>(a, b);
    (
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(e))),
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(o))),
    )
}
