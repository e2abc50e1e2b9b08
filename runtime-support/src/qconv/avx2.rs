//! The AVX2 tier of the integer convolution, for CPUs without VNNI. `vpmaddubsw` would
//! saturate pairs of full-range uint8 × int8 products, so both operands are widened to
//! int16 and `vpmaddwd` sums each pair into int32 exactly. The widening is paid once per
//! operand, not per product: a panel is widened in place after it is packed (every weight
//! block reads it), a block's weights once per panel (all `NR` lanes read them).
//!
//! A widened operand keeps the four-byte groups of the packed layouts, split into two
//! dwords: the int16 pair (byte 0, byte 2) and the pair (byte 1, byte 3) — `[k/4][2][NR]`
//! for a panel, `[k/4][2][MR]` for a block — so `vpmaddwd` of the matching dwords gives
//! half of a lane's four-way dot product. The epilogue runs on the accumulators in
//! registers and computes the same operations as `kernel::epilogue_scalar`, so the same
//! bits.

use super::{Epi, MR, NR, QOut};
use std::arch::x86_64::*;

/// Bytes of a widened panel of `k4` groups (twice the packed panel).
pub(super) const fn panel_bytes(k4: usize) -> usize {
    k4 * 8 * NR
}

/// Dwords of a widened weight block of `k4` groups.
pub(super) const fn block_words(k4: usize) -> usize {
    k4 * 2 * MR
}

/// Widens the packed panel `[k4][NR][4]` (uint8) at the start of `panel` into
/// `[k4][2][NR]` dwords of zero-extended int16 pairs, in place.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn widen_panel(k4: usize, panel: &mut [u8]) {
    assert!(panel.len() >= panel_bytes(k4));
    let low = _mm256_set1_epi32(0x00ff_00ff);
    let p = panel.as_mut_ptr();
    // Descending: group g's wide form covers packed groups 2g and 2g + 1, which are read
    // already (g ≥ 1) or are g itself, read into registers before the stores (g = 0).
    for g in (0..k4).rev() {
        // SAFETY: packed group g is bytes g·4·NR .. (g + 1)·4·NR of the panel, its wide form
        // g·8·NR .. (g + 1)·8·NR (checked above); NR = 32, four vectors of eight lanes.
        unsafe {
            let v: [__m256i; 4] = std::array::from_fn(|i| {
                _mm256_loadu_si256(p.add(g * 4 * NR + i * 32) as *const __m256i)
            });
            for (i, v) in v.into_iter().enumerate() {
                let even = p.add(g * 8 * NR + i * 32) as *mut __m256i;
                let odd = p.add(g * 8 * NR + 4 * NR + i * 32) as *mut __m256i;
                _mm256_storeu_si256(even, _mm256_and_si256(v, low));
                _mm256_storeu_si256(odd, _mm256_srli_epi16(v, 8));
            }
        }
    }
}

/// Widens a weight block `[k4][MR][4]` (int8) into `out`, `[k4][2][MR]` dwords of
/// sign-extended int16 pairs.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn widen_weights(k4: usize, w: &[i8], out: &mut [u32]) {
    assert!(w.len() >= k4 * MR * 4 && out.len() >= block_words(k4));
    for g in 0..k4 {
        // SAFETY: group g is MR · 4 = 32 bytes of `w` and 2 · MR dwords of `out` (checked).
        unsafe {
            let v = _mm256_loadu_si256(w.as_ptr().add(g * MR * 4) as *const __m256i);
            let o = out.as_mut_ptr().add(g * 2 * MR) as *mut __m256i;
            _mm256_storeu_si256(o, _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8));
            _mm256_storeu_si256(o.add(1), _mm256_srai_epi16(v, 8));
        }
    }
}

/// The block (`rows` channels from `ch0`) times the panel, four rows by sixteen lanes at a
/// time (eight accumulators, four panel vectors and two weight broadcasts in the sixteen
/// registers; three rows by all lanes spill), each sub-tile's epilogue applied in
/// registers: row r's first `lanes` outputs go to `dst + r · row_bytes`.
///
/// # Safety
/// The CPU has AVX2; each of the `rows` destinations holds `lanes` outputs of `p.q.out`'s
/// type.
#[target_feature(enable = "avx2")]
#[allow(
    clippy::too_many_arguments,
    reason = "a tile, its epilogue and its destination"
)]
pub(super) unsafe fn tile_epilogue(
    k4: usize,
    w: &[u32],
    panel: &[u8],
    p: &Epi,
    ch0: usize,
    rows: usize,
    colsum: Option<&[i32; NR]>,
    lanes: usize,
    dst: *mut u8,
    row_bytes: usize,
) {
    assert!(w.len() >= block_words(k4) && panel.len() >= panel_bytes(k4));
    assert!(rows <= MR && lanes <= NR);
    let (wp, pp) = (w.as_ptr(), panel.as_ptr());
    let es = p.q.out.size();
    for r0 in (0..rows).step_by(4) {
        for l0 in (0..lanes).step_by(16) {
            let mut acc = [[_mm256_setzero_si256(); 2]; 4];
            for g in 0..k4 {
                // SAFETY: lanes l0 .. l0 + 16 of both halves of group g lie in the panel,
                // rows r0 .. r0 + 4 of both halves of group g in the block (checked above;
                // r0 + 4 ≤ MR, l0 + 16 ≤ NR).
                unsafe {
                    let even = pp.add(g * 8 * NR + l0 * 4);
                    let odd = even.add(4 * NR);
                    let e0 = _mm256_loadu_si256(even as *const __m256i);
                    let e1 = _mm256_loadu_si256(even.add(32) as *const __m256i);
                    let o0 = _mm256_loadu_si256(odd as *const __m256i);
                    let o1 = _mm256_loadu_si256(odd.add(32) as *const __m256i);
                    let wg = wp.add(g * 2 * MR + r0);
                    for (r, a) in acc.iter_mut().enumerate() {
                        let we = _mm256_set1_epi32(*wg.add(r) as i32);
                        let wo = _mm256_set1_epi32(*wg.add(MR + r) as i32);
                        let s0 =
                            _mm256_add_epi32(_mm256_madd_epi16(e0, we), _mm256_madd_epi16(o0, wo));
                        let s1 =
                            _mm256_add_epi32(_mm256_madd_epi16(e1, we), _mm256_madd_epi16(o1, wo));
                        a[0] = _mm256_add_epi32(a[0], s0);
                        a[1] = _mm256_add_epi32(a[1], s1);
                    }
                }
            }
            for (r, a) in acc.iter().enumerate().take(rows - r0) {
                for (h, &v) in a.iter().enumerate() {
                    let l = l0 + 8 * h;
                    if l >= lanes {
                        break;
                    }
                    // SAFETY: the column sums hold NR lanes, l + 8 ≤ NR; row r0 + r's
                    // destination holds `lanes` outputs (caller), of which store8 writes
                    // lanes l .. min(l + 8, lanes).
                    unsafe {
                        let cs =
                            colsum.map(|c| _mm256_loadu_si256(c.as_ptr().add(l) as *const __m256i));
                        store8(
                            p,
                            ch0 + r0 + r,
                            v,
                            cs,
                            (lanes - l).min(8),
                            dst.add((r0 + r) * row_bytes + l * es),
                        )
                    };
                }
            }
        }
    }
}

/// Eight lanes of channel `ch`'s epilogue: the sums `acc` (the lanes' column sums `cs`
/// when some weight zero point is not zero) to the first `n` outputs at `dst`.
///
/// # Safety
/// The CPU has AVX2; `dst` holds `n ≤ 8` outputs of `p.q.out`'s type.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn store8(
    p: &Epi,
    ch: usize,
    acc: __m256i,
    cs: Option<__m256i>,
    n: usize,
    dst: *mut u8,
) {
    let q = &p.q;
    let mut v = _mm256_add_epi32(acc, _mm256_set1_epi32(p.corr[ch]));
    if let Some(cs) = cs {
        v = _mm256_sub_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(p.wzp[ch]), cs));
    }
    // A full vector is stored in place; a partial one through `out`, then its `n` outputs.
    let mut out = [0u8; 32];
    let at = if n == 8 { dst } else { out.as_mut_ptr() };
    // SAFETY: `at` is `dst`, which holds 8 outputs when n = 8 (caller), or `out`, which
    // holds 32 bytes; every store below writes 8 outputs.
    unsafe {
        match q.out {
            QOut::I32 => _mm256_storeu_si256(at as *mut __m256i, v),
            QOut::F32 => {
                let f = _mm256_add_ps(
                    _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(p.scale[ch])),
                    _mm256_set1_ps(p.fbias[ch]),
                );
                _mm256_storeu_ps(at as *mut f32, f);
            }
            QOut::U8 | QOut::I8 => {
                let s = _mm256_set1_pd(p.scale[ch] as f64);
                let lo = _mm256_set1_pd((q.lo - q.y_zp) as f64);
                let hi = _mm256_set1_pd((q.hi - q.y_zp) as f64);
                let zp = _mm_set1_epi32(q.y_zp);
                // The conversion rounds to nearest, ties to even (the default mode), as the
                // scalar epilogue's ROUND addition does.
                let half = |h: __m128i| {
                    let f = _mm256_mul_pd(_mm256_cvtepi32_pd(h), s);
                    let i = _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(f, lo), hi));
                    _mm_add_epi32(i, zp)
                };
                let a = half(_mm256_castsi256_si128(v));
                let b = half(_mm256_extracti128_si256::<1>(v));
                // In [lo, hi] ⊂ [-128, 255] already: the packs saturate nothing.
                let w = _mm_packs_epi32(a, b);
                let b8 = if q.out == QOut::U8 {
                    _mm_packus_epi16(w, w)
                } else {
                    _mm_packs_epi16(w, w)
                };
                _mm_storel_epi64(at as *mut __m128i, b8);
            }
        }
        if n < 8 {
            std::ptr::copy_nonoverlapping(out.as_ptr(), dst, n * q.out.size());
        }
    }
}
