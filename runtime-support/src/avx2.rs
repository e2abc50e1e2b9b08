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
    [
        _mm256_permute2f128_ps::<0x20>(u[0], u[4]),
        _mm256_permute2f128_ps::<0x20>(u[1], u[5]),
        _mm256_permute2f128_ps::<0x20>(u[2], u[6]),
        _mm256_permute2f128_ps::<0x20>(u[3], u[7]),
        _mm256_permute2f128_ps::<0x31>(u[0], u[4]),
        _mm256_permute2f128_ps::<0x31>(u[1], u[5]),
        _mm256_permute2f128_ps::<0x31>(u[2], u[6]),
        _mm256_permute2f128_ps::<0x31>(u[3], u[7]),
    ]
}

/// Six rows interleaved column by column into `d` (`d[kx·6 + r] = rows[r][kx]`: a GEMM's
/// packed A panel), 8 columns at a time through `transpose8`; returns the columns done (a
/// multiple of 8, at most `kc`). Writes only `d[..6·done]`.
///
/// # Safety
/// Each of `rows` is readable for `kc` floats, `d` writable for `6·kc`.
#[target_feature(enable = "avx2")]
pub unsafe fn interleave6(rows: [*const f32; 6], kc: usize, d: *mut f32) -> usize {
    let mut kx = 0;
    // SAFETY: columns kx..kx + 8 of each row; floats 6·kx..6·kx + 48 of d.
    unsafe {
        while kx + 8 <= kc {
            let z = _mm256_setzero_ps();
            let t = transpose8([
                _mm256_loadu_ps(rows[0].add(kx)),
                _mm256_loadu_ps(rows[1].add(kx)),
                _mm256_loadu_ps(rows[2].add(kx)),
                _mm256_loadu_ps(rows[3].add(kx)),
                _mm256_loadu_ps(rows[4].add(kx)),
                _mm256_loadu_ps(rows[5].add(kx)),
                z,
                z,
            ]);
            let o = d.add(kx * 6);
            // Column j's 6 values and 2 zeros, which column j + 1's store overwrites; the
            // last column stores its 6 alone.
            for (j, v) in t.iter().take(7).enumerate() {
                _mm256_storeu_ps(o.add(j * 6), *v);
            }
            _mm_storeu_ps(o.add(42), _mm256_castps256_ps128(t[7]));
            _mm_store_sd(
                o.add(46).cast(),
                _mm_castps_pd(_mm256_extractf128_ps::<1>(t[7])),
            );
            kx += 8;
        }
    }
    kx
}
