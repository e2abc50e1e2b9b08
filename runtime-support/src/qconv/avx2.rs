//! The AVX2 tier of the integer convolution and matrix product, for CPUs without VNNI. `vpmaddubsw` would
//! saturate pairs of full-range uint8 × int8 products, so both operands are widened to
//! int16 and `vpmaddwd` sums each pair into int32 exactly. The widening is paid once per
//! operand, not per product. Convolution: a panel is widened in place after it is packed
//! (every weight block reads it), a block's weights once per panel (all `NR` lanes read
//! them). Matrix product: a block of rows of `A` in place after it is packed (every weight
//! panel reads it); the weight lanes, constant and packed once, are widened in the loop.
//!
//! A widened operand keeps the four-byte groups of the packed layouts, split into two
//! dwords: the int16 pair (byte 0, byte 2) and the pair (byte 1, byte 3) — `[k/4][2][NR]`
//! for a panel, `[k/4][2][MR]` for a block — so `vpmaddwd` of the matching dwords gives
//! half of a lane's four-way dot product. The epilogue runs on the accumulators in
//! registers and gives the same bits as `kernel::epilogue_scalar`.

use super::kernel::sums;
use super::requant;
use super::{
    Epi, MR, NR, QOut, QScalars, TileOut, wide_block_words as block_words,
    wide_panel_bytes as panel_bytes,
};
use crate::simd::dot::{Avx2Bytes, Avx2Wide};
use std::arch::x86_64::*;

/// Widens the packed panel `[k4][NR][4]` (uint8) at the start of `panel` into
/// `[k4][2][NR]` dwords of zero-extended int16 pairs, in place.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn widen_panel(k4: usize, panel: &mut [u8]) {
    // SAFETY: forwarded (caller).
    unsafe { widen_unsigned::<NR>(k4, panel) }
}

/// Widens the packed rows `[k4][MR][4]` (uint8) at the start of `block` into `[k4][2][MR]`
/// dwords, in place.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn widen_rows(k4: usize, block: &mut [u8]) {
    // SAFETY: forwarded (caller).
    unsafe { widen_unsigned::<MR>(k4, block) }
}

/// `[k4][L][4]` uint8 at the start of `buf` to `[k4][2][L]` dwords of zero-extended int16
/// pairs (bytes 0 and 2, bytes 1 and 3), in place.
///
/// # Safety
/// The CPU has AVX2.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn widen_unsigned<const L: usize>(k4: usize, buf: &mut [u8]) {
    const { assert!(L.is_multiple_of(8) && L <= 32) };
    assert!(buf.len() >= k4 * 8 * L);
    let low = _mm256_set1_epi32(0x00ff_00ff);
    let p = buf.as_mut_ptr();
    // Descending: group g's wide form covers packed groups 2g and 2g + 1, which are read
    // already (g ≥ 1) or are g itself, read into registers before the stores (g = 0).
    for g in (0..k4).rev() {
        // SAFETY: packed group g is bytes g·4·L .. (g + 1)·4·L of the buffer, its wide form
        // g·8·L .. (g + 1)·8·L (checked above); L / 8 vectors of eight lanes.
        unsafe {
            let mut v = [_mm256_setzero_si256(); 4];
            for (i, v) in v.iter_mut().enumerate().take(L / 8) {
                *v = _mm256_loadu_si256(p.add(g * 4 * L + i * 32) as *const __m256i);
            }
            for (i, &v) in v.iter().enumerate().take(L / 8) {
                let even = p.add(g * 8 * L + i * 32) as *mut __m256i;
                let odd = p.add(g * 8 * L + 4 * L + i * 32) as *mut __m256i;
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

/// The block times the panel into `out`, four rows by sixteen lanes at a time (eight
/// accumulators, four panel vectors and two weight broadcasts in the sixteen registers;
/// three rows by all lanes spill), each sub-tile's epilogue applied in registers.
///
/// # Safety
/// The CPU has AVX2; each of `out`'s rows holds `lanes` outputs of its epilogue's type.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn tile_epilogue(k4: usize, w: &[u32], panel: &[u8], out: &TileOut) {
    let (rows, lanes) = (out.rows, out.lanes);
    assert!(w.len() >= block_words(k4) && panel.len() >= panel_bytes(k4));
    assert!(rows <= MR && lanes <= NR);
    let (wp, pp) = (w.as_ptr() as *const u8, panel.as_ptr());
    // SAFETY: this function's features. The second halves of the widened panel's and
    // block's groups.
    let d = unsafe { Avx2Wide::<false>::new(4 * NR, 4 * MR) };
    for r0 in (0..rows).step_by(4) {
        for l0 in (0..lanes).step_by(16) {
            // SAFETY: lanes l0 .. l0 + 16 of both halves of every group lie in the panel,
            // rows r0 .. r0 + 4 of both halves in the block (checked above; r0 + 4 ≤ MR,
            // l0 + 16 ≤ NR).
            let acc =
                unsafe { sums::<_, 4, 2>(d, k4, pp.add(l0 * 4), 8 * NR, wp.add(r0 * 4), 8 * MR) };
            // SAFETY: forwarded (caller).
            unsafe { store_sub_tile(&acc, r0, l0, out) };
        }
    }
}

/// `tile_epilogue` for blocks whose weight pairs keep `vpmaddubsw` exact (each pair of
/// bytes (0, 1) and (2, 3) of a four-byte group has `|w0| + |w1| ≤ 128`, so no pair of
/// uint8 × int8 products leaves int16: 255 · 128 < 2^15), as the weights of models quantized
/// with a reduced (7-bit) range are: the packed panel and block as they are, a group's
/// four-way dot product by `vpmaddubsw` and `vpmaddwd` with ones (three operations per 32
/// products, where widening takes four). The same integers.
///
/// # Safety
/// As `tile_epilogue`; `w` holds `k4 · MR · 4` bytes whose pairs are as above, `panel`
/// `k4 · 4 · NR`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn tile_epilogue_bytes(k4: usize, w: &[i8], panel: &[u8], out: &TileOut) {
    let (rows, lanes) = (out.rows, out.lanes);
    assert!(w.len() >= k4 * MR * 4 && panel.len() >= k4 * 4 * NR);
    assert!(rows <= MR && lanes <= NR);
    let (wp, pp) = (w.as_ptr(), panel.as_ptr());
    for r0 in (0..rows).step_by(4) {
        for l0 in (0..lanes).step_by(16) {
            // SAFETY: lanes l0 .. l0 + 16 of every group lie in the panel, rows r0 .. r0 + 4
            // in the block (checked above; r0 + 4 ≤ MR, l0 + 16 ≤ NR).
            let acc = unsafe {
                let d = Avx2Bytes::<true>::new();
                sums::<_, 4, 2>(
                    d,
                    k4,
                    pp.add(l0 * 4),
                    NR * 4,
                    wp.add(r0 * 4) as *const u8,
                    MR * 4,
                )
            };
            // SAFETY: forwarded (caller).
            unsafe { store_sub_tile(&acc, r0, l0, out) };
        }
    }
}

/// The epilogue of the sub-tile at rows `r0 ..` and lanes `l0 ..` of `out`'s block.
///
/// # Safety
/// The CPU has AVX2; each of `out`'s rows holds `lanes` outputs of its epilogue's type.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store_sub_tile(acc: &[[__m256i; 2]; 4], r0: usize, l0: usize, out: &TileOut) {
    let p = out.epi;
    let es = p.q.out.size();
    for_each_vector(acc, r0, out.rows, l0, out.lanes, |r, l, n, v| {
        // SAFETY: the column sums hold NR lanes, l + 8 ≤ NR; row r's destination holds
        // `lanes` outputs (caller), of which store8 writes lanes l .. l + n.
        unsafe {
            let cs = out
                .colsum
                .map(|c| _mm256_loadu_si256(c.as_ptr().add(l) as *const __m256i));
            store8(
                p,
                out.ch0 + r,
                v,
                cs,
                n,
                out.dst.add(r * out.row_bytes + l * es),
            )
        }
    });
}

/// Calls `f(r, l, n, v)` for each vector `v` of a sub-tile at rows `r0 ..` and lanes
/// `l0 ..` holding outputs: row `r` (of `rows`), lanes `l .. l + n` (of `lanes`).
#[inline(always)]
fn for_each_vector(
    acc: &[[__m256i; 2]; 4],
    r0: usize,
    rows: usize,
    l0: usize,
    lanes: usize,
    mut f: impl FnMut(usize, usize, usize, __m256i),
) {
    for (r, a) in acc.iter().enumerate().take(rows - r0) {
        for (h, &v) in a.iter().enumerate() {
            let l = l0 + 8 * h;
            if l >= lanes {
                break;
            }
            f(r0 + r, l, (lanes - l).min(8), v);
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
unsafe fn store8(p: &Epi, ch: usize, acc: __m256i, cs: Option<__m256i>, n: usize, dst: *mut u8) {
    let mut v = _mm256_add_epi32(acc, _mm256_set1_epi32(p.corr[ch]));
    if let Some(cs) = cs {
        v = _mm256_sub_epi32(v, _mm256_mullo_epi32(_mm256_set1_epi32(p.wzp[ch]), cs));
    }
    let (scale, fbias) = (_mm256_set1_ps(p.scale[ch]), _mm256_set1_ps(p.fbias[ch]));
    // SAFETY: forwarded (caller).
    unsafe { finish8(&p.q, p.small_sums, v, scale, fbias, n, dst) }
}

/// Eight lanes of a row of the matrix product's epilogue, columns `j0 ..` (their constants
/// vary along the lanes): the sums `acc`, the row's sum `rowsum` (for the weights' zero
/// points), to the first `n` outputs at `dst`.
///
/// # Safety
/// The CPU has AVX2; columns `j0 .. j0 + n` have constants in `p`; `dst` holds `n ≤ 8`
/// outputs of `p.q.out`'s type.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store8_columns(p: &Epi, j0: usize, acc: __m256i, rowsum: i32, n: usize, dst: *mut u8) {
    // Eight columns' constants; past `n` (not stored) zero.
    let cols = |v: &[u32]| -> __m256i {
        let mut a = [0u32; 8];
        a[..n].copy_from_slice(&v[j0..j0 + n]);
        // SAFETY: `a` holds eight dwords.
        unsafe { _mm256_loadu_si256(a.as_ptr() as *const __m256i) }
    };
    // SAFETY: i32 and f32 have the size and alignment of u32, any bits are a u32.
    let words =
        |v: &[i32]| unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u32, v.len()) };
    // SAFETY: as above.
    let fwords =
        |v: &[f32]| unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u32, v.len()) };
    let (corr, wzp) = (cols(words(p.corr)), cols(words(p.wzp)));
    let (scale, fbias) = (cols(fwords(p.scale)), cols(fwords(p.fbias)));
    let v = _mm256_sub_epi32(
        _mm256_add_epi32(acc, corr),
        _mm256_mullo_epi32(wzp, _mm256_set1_epi32(rowsum)),
    );
    let (scale, fbias) = (_mm256_castsi256_ps(scale), _mm256_castsi256_ps(fbias));
    // SAFETY: forwarded (caller).
    unsafe { finish8(&p.q, p.small_sums, v, scale, fbias, n, dst) }
}

/// The epilogue's output step for eight lanes of corrected sums `v`, with per-lane `scale`
/// and `fbias`: the first `n` outputs at `dst`. The same bits as `kernel::epilogue_scalar`
/// (the requantization by `requant::requantize8`).
///
/// # Safety
/// The CPU has AVX2; `dst` holds `n ≤ 8` outputs of `q.out`'s type.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn finish8(
    q: &QScalars,
    small_sums: bool,
    v: __m256i,
    scale: __m256,
    fbias: __m256,
    n: usize,
    dst: *mut u8,
) {
    // A full vector is stored in place; a partial one through `out`, then its `n` outputs.
    let mut out = [0u8; 32];
    let at = if n == 8 { dst } else { out.as_mut_ptr() };
    // SAFETY: `at` is `dst`, which holds 8 outputs when n = 8 (caller), or `out`, which
    // holds 32 bytes; every store below writes 8 outputs.
    unsafe {
        match q.out {
            QOut::I32 => _mm256_storeu_si256(at as *mut __m256i, v),
            QOut::F32 => {
                let f = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), scale), fbias);
                _mm256_storeu_ps(at as *mut f32, f);
            }
            QOut::U8 | QOut::I8 => {
                let i = requant::requantize8(v, scale, q.lo, q.hi, q.y_zp, small_sums);
                // In [lo, hi] ⊂ [-128, 255] already: the packs saturate nothing.
                let w =
                    _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256::<1>(i));
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

/// The matrix product's block of `rows` rows of `A` times the weight panel `w`
/// (`[k4][NR][4]` int8 lanes), four rows by sixteen lanes at a time, each sub-tile's
/// epilogue applied in registers: row r's first `lanes` outputs (columns `n0 ..`) go to
/// `dst + r · row_bytes`. `rowsums` are the rows' sums (for the weights' zero points; zero
/// when they are all zero). With `short_pairs` (the weights' byte pairs keep `vpmaddubsw`
/// exact) the block is as packed and a group's dot product is `vpmaddubsw` and `vpmaddwd`
/// with ones; otherwise the block is widened (`widen_rows`) and the weights are widened
/// here.
///
/// # Safety
/// The CPU has AVX2; each of the `rows` destinations holds `lanes` outputs of `p.q.out`'s
/// type; columns `n0 .. n0 + lanes` have constants in `p`; with `short_pairs`, the
/// weights' pairs are as above.
#[target_feature(enable = "avx2")]
#[allow(
    clippy::too_many_arguments,
    reason = "a tile, its epilogue and its destination"
)]
pub(super) unsafe fn matmul_tile_epilogue(
    k4: usize,
    short_pairs: bool,
    a: &[u8],
    w: &[i8],
    p: &Epi,
    n0: usize,
    rows: usize,
    rowsums: &[i32; MR],
    lanes: usize,
    dst: *mut u8,
    row_bytes: usize,
) {
    assert!(a.len() >= k4 * 8 * MR && w.len() >= k4 * NR * 4);
    assert!(rows <= MR && lanes <= NR);
    let (ap, wp) = (a.as_ptr(), w.as_ptr() as *const u8);
    let es = p.q.out.size();
    for r0 in (0..rows).step_by(4) {
        for l0 in (0..lanes).step_by(16) {
            // SAFETY: lanes l0 .. l0 + 16 of every group lie in the weight panel, rows r0 ..
            // r0 + 4 in the block, packed (its first k4 · 4 · MR bytes) or in both halves of
            // its widened groups (checked above; r0 + 4 ≤ MR, l0 + 16 ≤ NR).
            let acc = unsafe {
                let (wl, ar) = (wp.add(l0 * 4), ap.add(r0 * 4));
                if short_pairs {
                    sums::<_, 4, 2>(Avx2Bytes::<false>::new(), k4, wl, NR * 4, ar, MR * 4)
                } else {
                    // The weight lanes are widened as they are loaded.
                    let d = Avx2Wide::<true>::new(0, 4 * MR);
                    sums::<_, 4, 2>(d, k4, wl, NR * 4, ar, 8 * MR)
                }
            };
            for_each_vector(&acc, r0, rows, l0, lanes, |r, l, n, v| {
                // SAFETY: row r's destination holds `lanes` outputs, columns n0 .. n0 +
                // lanes have constants (caller); store8_columns writes lanes l .. l + n.
                unsafe {
                    store8_columns(p, n0 + l, v, rowsums[r], n, dst.add(r * row_bytes + l * es))
                }
            });
        }
    }
}
