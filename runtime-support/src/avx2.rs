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
