//! 256-bit helpers shared by the AVX2 kernels (GEMM tiles, im2col packing, depthwise
//! conv, pooling).

use std::arch::x86_64::*;

/// Lane mask for the first `n` of 8 lanes (`n` may exceed 8 or be 0).
#[inline]
#[target_feature(enable = "avx2")]
pub fn first_lanes(n: usize) -> __m256i {
    let idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_cmpgt_epi32(_mm256_set1_epi32(n.min(8) as i32), idx)
}

/// Transposes the 8×8 block of floats held as 8 row vectors (rows in, columns out).
#[inline]
#[target_feature(enable = "avx2")]
pub fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t: [__m256; 8] = [
        _mm256_unpacklo_ps(r[0], r[1]),
        _mm256_unpackhi_ps(r[0], r[1]),
        _mm256_unpacklo_ps(r[2], r[3]),
        _mm256_unpackhi_ps(r[2], r[3]),
        _mm256_unpacklo_ps(r[4], r[5]),
        _mm256_unpackhi_ps(r[4], r[5]),
        _mm256_unpacklo_ps(r[6], r[7]),
        _mm256_unpackhi_ps(r[6], r[7]),
    ];
    let u: [__m256; 8] = [
        _mm256_shuffle_ps::<0x44>(t[0], t[2]),
        _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
        _mm256_shuffle_ps::<0x44>(t[1], t[3]),
        _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
        _mm256_shuffle_ps::<0x44>(t[4], t[6]),
        _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
        _mm256_shuffle_ps::<0x44>(t[5], t[7]),
        _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
    ];
    std::array::from_fn(|j| {
        if j < 4 {
            _mm256_permute2f128_ps::<0x20>(u[j], u[4 + j])
        } else {
            _mm256_permute2f128_ps::<0x31>(u[j - 4], u[j])
        }
    })
}
