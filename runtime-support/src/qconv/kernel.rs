//! The integer products' register tile, written once over the integer layer
//! (`simd::dot`): `sums`, which every tier of the convolution and the matrix product runs;
//! the portable tile and the convolution's VNNI tile with its epilogue in registers (the
//! AVX2 tier's epilogues are `avx2.rs`, the matrix product's `matmul_kernel.rs`); and the
//! scalar epilogue that turns a row of the tile into outputs. Every tier computes the
//! same integers, and its epilogue the same outputs: the scalar one in float64 (no fused
//! multiply-add; round half to even by the 1.5·2^52 addition, which is exact below 2^51),
//! the vector ones' requantization in float32 lanes where that gives the same bits
//! (`requant.rs`), so the outputs are bit-identical across CPUs.

#[cfg(target_arch = "x86_64")]
use super::requant;
use super::{Epi, MR, NR, QOut, TileOut};
#[cfg(target_arch = "x86_64")]
use crate::simd::dot::Vnni512;
use crate::simd::dot::{Bytes, Dot};

/// The int32 sums of an `R × V·WIDTH` tile, written once over the integer layer for every
/// instruction set: `acc[r][v]` holds lanes `v·WIDTH ..` of row `r`, summed over `k4`
/// groups; group `g`'s lanes lie at `lanes + g·lane_group`, its rows at
/// `rows + g·row_group`, in the layouts `D` reads (`simd::dot`).
///
/// # Safety
/// `D`'s instructions run on this CPU (its token exists); each of the `k4` groups holds `V`
/// vectors of lanes and `R` rows as `D` reads them.
#[inline(always)]
pub(super) unsafe fn sums<D: Dot, const R: usize, const V: usize>(
    d: D,
    k4: usize,
    lanes: *const u8,
    lane_group: usize,
    rows: *const u8,
    row_group: usize,
) -> [[D::Acc; V]; R] {
    let mut acc = [[d.zero(); V]; R];
    for g in 0..k4 {
        // SAFETY: group g holds the vectors and rows read (caller).
        unsafe {
            let (lp, rp) = (lanes.add(g * lane_group), rows.add(g * row_group));
            let mut l = [d.lanes(lp, 0); V];
            for (v, l) in l.iter_mut().enumerate().skip(1) {
                *l = d.lanes(lp, v);
            }
            for (r, a) in acc.iter_mut().enumerate() {
                let b = d.row(rp, r);
                for (a, &l) in a.iter_mut().zip(&l) {
                    *a = d.dot(*a, l, b);
                }
            }
        }
    }
    acc
}

/// `tile[r][l] = Σ_k rows[k/4][r][k%4] · cols[k/4][l][k%4]` (bytes, exact int32) by the
/// portable layer: the portable tier of the convolution (`U`: uint8 panel columns × int8
/// weight rows; the other tiers apply their epilogue in registers) and of the matrix
/// product (uint8 activation rows × int8 weight columns).
pub(super) fn tile_portable<const U: bool>(
    k4: usize,
    rows: &[u8],
    cols: &[u8],
    tile: &mut [[i32; NR]; MR],
) {
    assert!(rows.len() >= k4 * MR * 4 && cols.len() >= k4 * NR * 4);
    let d = Bytes::<U>;
    // SAFETY: portable code; the k4 groups of both operands lie in them (checked above).
    let acc =
        unsafe { sums::<_, MR, { NR / 8 }>(d, k4, cols.as_ptr(), NR * 4, rows.as_ptr(), MR * 4) };
    for (t, a) in tile.iter_mut().zip(&acc) {
        for (v, &a) in a.iter().enumerate() {
            // SAFETY: lanes 8v .. 8v + 8 of the row (v < NR / 8).
            unsafe { d.store(t.as_mut_ptr().add(v * 8), a) };
        }
    }
}

/// Signed bytes as bytes (the integer layer reads both as bytes).
pub(super) fn as_bytes(v: &[i8]) -> &[u8] {
    // SAFETY: i8 and u8 have one size and alignment, and every bit pattern is both.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len()) }
}

/// The VNNI tile with its epilogue applied in registers, into `out` (the first `lanes` lanes
/// of each row by masked stores). The same bits as `tile_portable` then
/// `epilogue_scalar`.
///
/// # Safety
/// The CPU has AVX-512 F, BW, DQ, VL and VNNI; `w` holds `k4·MR·4` bytes, `panel`
/// `k4·NR·4`; each of `out`'s rows holds `lanes` outputs of its epilogue's type.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
pub(super) unsafe fn tile_epilogue_vnni512(k4: usize, w: &[i8], panel: &[u8], out: &TileOut) {
    use std::arch::x86_64::*;
    let TileOut {
        epi: p,
        ch0,
        rows,
        colsum,
        lanes,
        dst,
        row_bytes,
    } = *out;
    assert!(w.len() >= k4 * MR * 4 && panel.len() >= k4 * NR * 4 && rows <= MR);
    // SAFETY: this function's features; the k4 groups of the panel and of the block lie
    // inside them (checked above).
    let acc = unsafe {
        let d = Vnni512::<true>::new();
        sums::<_, MR, 2>(
            d,
            k4,
            panel.as_ptr(),
            NR * 4,
            w.as_ptr() as *const u8,
            MR * 4,
        )
    };
    // SAFETY: the column sums hold NR lanes.
    let cs = colsum.map(|c| unsafe {
        [
            _mm512_loadu_si512(c.as_ptr() as *const _),
            _mm512_loadu_si512(c.as_ptr().add(16) as *const _),
        ]
    });
    let corrected = |r: usize, a: &[__m512i; 2], h: usize| {
        let v = _mm512_add_epi32(a[h], _mm512_set1_epi32(p.corr[ch0 + r]));
        match cs {
            Some(c) => _mm512_sub_epi32(
                v,
                _mm512_mullo_epi32(_mm512_set1_epi32(p.wzp[ch0 + r]), c[h]),
            ),
            None => v,
        }
    };
    if let QOut::U8 | QOut::I8 = p.q.out {
        // A row's 32 outputs in one store (masked when the panel is partial).
        let mask = ((1u64 << lanes) - 1) as u32;
        // SAFETY: the CPU has AVX-512 F (this function's features).
        let b = unsafe { requant::Bounds512::new(p.q.lo, p.q.hi, p.q.y_zp, p.small_sums) };
        each_row!(acc, rows, |r, a| {
            let s = _mm512_set1_ps(p.scale[ch0 + r]);
            // SAFETY: this function's features.
            let bytes = |h| unsafe {
                _mm512_cvtepi32_epi8(requant::requantize16(corrected(r, a, h), s, &b))
            };
            let row = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(bytes(0)), bytes(1));
            // SAFETY: row r's destination holds `lanes` outputs (caller).
            unsafe {
                let d = dst.add(r * row_bytes) as *mut __m256i;
                if lanes == NR {
                    _mm256_storeu_si256(d, row);
                } else {
                    _mm256_mask_storeu_epi8(d as *mut i8, mask, row);
                }
            }
        });
        return;
    }
    let masks: [u16; 2] = std::array::from_fn(|h| {
        let n = lanes.saturating_sub(16 * h).min(16);
        ((1u32 << n) - 1) as u16
    });
    each_row!(acc, rows, |r, a| {
        for (h, &mask) in masks.iter().enumerate() {
            if mask != 0 {
                // SAFETY: row r's destination holds `lanes` outputs (caller), lanes 16h on
                // at `16h` outputs in.
                unsafe {
                    store16_wide(
                        p,
                        ch0 + r,
                        corrected(r, a, h),
                        mask,
                        dst.add(r * row_bytes + 16 * h * p.q.out.size()),
                    )
                };
            }
        }
    });
}

/// 1.5·2^52: adding and subtracting it rounds a float64 below 2^51 in magnitude to an
/// integer, ties to even (the default rounding mode), in every tier alike.
const ROUND: f64 = 6_755_399_441_055_744.0;

/// The corrected sum of lane `l`: the tile's plus the channel's constant, minus `zw·Σx`.
#[inline(always)]
fn corrected(p: &Epi, ch: usize, acc: i32, colsum: Option<&[i32; NR]>, l: usize) -> i32 {
    let mut v = acc.wrapping_add(p.corr[ch]);
    if let Some(cs) = colsum {
        v = v.wrapping_sub(p.wzp[ch].wrapping_mul(cs[l]));
    }
    v
}

/// The first `lanes` outputs of channel `ch` from its tile row, one at a time.
///
/// # Safety
/// `dst` holds `lanes` outputs of `p.q.out`'s type.
pub(super) unsafe fn epilogue_scalar(
    p: &Epi,
    ch: usize,
    row: &[i32; NR],
    colsum: Option<&[i32; NR]>,
    lanes: usize,
    dst: *mut u8,
) {
    let (scale, fbias) = (p.scale[ch], p.fbias[ch]);
    let q = &p.q;
    let (lo, hi) = ((q.lo - q.y_zp) as f64, (q.hi - q.y_zp) as f64);
    for (l, &acc) in row.iter().enumerate().take(lanes) {
        let v = corrected(p, ch, acc, colsum, l);
        // SAFETY: lane l < lanes of `dst` (caller).
        unsafe {
            match q.out {
                QOut::I32 => (dst as *mut i32).add(l).write_unaligned(v),
                QOut::F32 => (dst as *mut f32)
                    .add(l)
                    .write_unaligned(v as f32 * scale + fbias),
                QOut::U8 | QOut::I8 => {
                    let f = (v as f64 * scale as f64).max(lo).min(hi);
                    let r = (f + ROUND) - ROUND;
                    *dst.add(l) = (r as i32 + q.y_zp) as u8;
                }
            }
        }
    }
}

/// Sixteen lanes of channel `ch`'s int32 or float32 epilogue: the corrected sums `v` to the
/// outputs at `dst`, the lanes of `mask` only (masked stores).
///
/// # Safety
/// The CPU has AVX-512 F, BW, DQ and VL; `dst` holds the masked lanes' outputs; the output
/// type is int32 or float32.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn store16_wide(p: &Epi, ch: usize, v: std::arch::x86_64::__m512i, mask: u16, dst: *mut u8) {
    use std::arch::x86_64::*;
    // SAFETY: the masked lanes of `dst` (caller).
    unsafe {
        match p.q.out {
            QOut::I32 => _mm512_mask_storeu_epi32(dst as *mut i32, mask, v),
            QOut::F32 => {
                let f = _mm512_add_ps(
                    _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(p.scale[ch])),
                    _mm512_set1_ps(p.fbias[ch]),
                );
                _mm512_mask_storeu_ps(dst as *mut f32, mask, f);
            }
            QOut::U8 | QOut::I8 => unreachable!("quantized outputs are stored a row at a time"),
        }
    }
}
