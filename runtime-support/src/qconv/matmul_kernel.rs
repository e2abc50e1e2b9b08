//! The matrix product's `MR × NR` tile: `MR` rows of the activations (uint8, broadcast four
//! bytes at a time) by a panel of `NR` weight columns (int8 lanes), per instruction set, and
//! its epilogue, whose constants vary along the lanes (one per column). All tiers compute
//! the same integers and the same outputs, as the convolution's.

use super::kernel::{as_bytes, sums, tile_portable};
#[cfg(target_arch = "x86_64")]
use super::requant;
use super::{Epi, MR, NR, QOut, Tier};
#[cfg(target_arch = "x86_64")]
use crate::simd::dot::{Dot, Vnni512};

/// `tile[r][l] = Σ_k a[k/4][r][k%4] · w[k/4][l][k%4]` (uint8 × int8, exact int32).
///
/// # Safety
/// The CPU runs `tier`; `a` holds `k4·MR·4` bytes, `w` `k4·NR·4`.
pub(super) unsafe fn tile(tier: Tier, k4: usize, a: &[u8], w: &[i8], tile: &mut [[i32; NR]; MR]) {
    assert!(a.len() >= k4 * MR * 4 && w.len() >= k4 * NR * 4);
    match tier {
        // SAFETY: the CPU has AVX-512 VNNI (caller); the sizes are checked above.
        #[cfg(target_arch = "x86_64")]
        Tier::Vnni512 { .. } => unsafe { tile_vnni512(k4, a.as_ptr(), w.as_ptr(), tile) },
        // The AVX2 tier widens its operands first (`avx2.rs`); the same integers.
        #[cfg(target_arch = "x86_64")]
        Tier::Avx2 => tile_portable::<false>(k4, a, as_bytes(w), tile),
        Tier::Portable => tile_portable::<false>(k4, a, as_bytes(w), tile),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile_vnni512(k4: usize, a: *const u8, w: *const i8, tile: &mut [[i32; NR]; MR]) {
    // SAFETY: forwarded (caller).
    let acc = unsafe { accumulate_vnni512(k4, a, w) };
    // SAFETY: this function's features.
    let d = unsafe { Vnni512::<false>::new() };
    for (t, v) in tile.iter_mut().zip(&acc) {
        // SAFETY: each row of the tile holds 32 i32.
        unsafe {
            d.store(t.as_mut_ptr(), v[0]);
            d.store(t.as_mut_ptr().add(16), v[1]);
        }
    }
}

/// The VNNI tile's accumulators (`kernel::sums`): row r's lanes 0-15 and 16-31.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI; `a` holds `k4·MR·4` bytes, `w` `k4·NR·4`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn accumulate_vnni512(
    k4: usize,
    a: *const u8,
    w: *const i8,
) -> [[std::arch::x86_64::__m512i; 2]; MR] {
    // SAFETY: this function's features; the groups lie in the operands (caller).
    unsafe {
        sums::<_, MR, 2>(
            Vnni512::<false>::new(),
            k4,
            w as *const u8,
            NR * 4,
            a,
            MR * 4,
        )
    }
}

/// 1.5·2^52 (see the convolution's epilogue).
const ROUND: f64 = 6_755_399_441_055_744.0;

/// Writes the first `lanes` outputs (columns `n0 ..`) of a row whose activations sum to
/// `rowsum` (used when some weight zero point is not zero), lane by lane.
///
/// # Safety
/// `dst` holds `lanes` outputs of `p.q.out`'s type; the columns lie in `p`'s arrays.
pub(super) unsafe fn epilogue_scalar(
    p: &Epi,
    n0: usize,
    row: &[i32; NR],
    rowsum: i32,
    lanes: usize,
    dst: *mut u8,
) {
    let q = &p.q;
    let (lo, hi) = ((q.lo - q.y_zp) as f64, (q.hi - q.y_zp) as f64);
    for (l, &acc) in row.iter().enumerate().take(lanes) {
        let j = n0 + l;
        let v = acc
            .wrapping_add(p.corr[j])
            .wrapping_sub(p.wzp[j].wrapping_mul(rowsum));
        // SAFETY: lane l < lanes of `dst` (caller).
        unsafe {
            match q.out {
                QOut::I32 => (dst as *mut i32).add(l).write_unaligned(v),
                QOut::F32 => (dst as *mut f32)
                    .add(l)
                    .write_unaligned(v as f32 * p.scale[j] + p.fbias[j]),
                QOut::U8 | QOut::I8 => {
                    let f = (v as f64 * p.scale[j] as f64).max(lo).min(hi);
                    let r = (f + ROUND) - ROUND;
                    *dst.add(l) = (r as i32 + q.y_zp) as u8;
                }
            }
        }
    }
}

/// The VNNI tile with its epilogue in registers: rows `0 .. rows` of the block (their
/// activation sums in `rowsums`) to `dst + r · row_bytes`, columns `n0 ..`, the first
/// `lanes` by masked stores.
///
/// # Safety
/// The CPU has AVX-512 F, BW, DQ, VL and VNNI; `a` holds `k4·MR·4` bytes, `w` `k4·NR·4`;
/// each row's destination holds `lanes` outputs; `p`'s arrays hold `n0 + NR` columns or
/// more, or `lanes` is their end (masked loads).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
#[allow(
    clippy::too_many_arguments,
    reason = "a tile, its epilogue and its destination"
)]
pub(super) unsafe fn tile_epilogue_vnni512(
    k4: usize,
    a: &[u8],
    w: &[i8],
    p: &Epi,
    n0: usize,
    rows: usize,
    rowsums: Option<&[i32; MR]>,
    lanes: usize,
    dst: *mut u8,
    row_bytes: usize,
) {
    use std::arch::x86_64::*;
    assert!(a.len() >= k4 * MR * 4 && w.len() >= k4 * NR * 4 && rows <= MR);
    assert!(n0 + lanes <= p.corr.len() && lanes <= NR);
    // SAFETY: the sizes are checked above.
    let acc = unsafe { accumulate_vnni512(k4, a.as_ptr(), w.as_ptr()) };
    let q = &p.q;
    let es = q.out.size();
    for h in 0..2 {
        let n = lanes.saturating_sub(16 * h).min(16);
        if n == 0 {
            continue;
        }
        let mask = ((1u32 << n) - 1) as u16;
        let j = n0 + 16 * h;
        // SAFETY: columns j .. j + n lie in the arrays (checked above); masked loads.
        let (corr, wzp, scale, fbias) = unsafe {
            (
                _mm512_maskz_loadu_epi32(mask, p.corr.as_ptr().add(j)),
                _mm512_maskz_loadu_epi32(mask, p.wzp.as_ptr().add(j)),
                _mm512_maskz_loadu_ps(mask, p.scale.as_ptr().add(j)),
                _mm512_maskz_loadu_ps(mask, p.fbias.as_ptr().add(j)),
            )
        };
        // SAFETY: the CPU has AVX-512 F (this function's features).
        let bounds = unsafe { requant::Bounds512::new(q.lo, q.hi, q.y_zp, p.small_sums) };
        each_row!(acc, rows, |r, av| {
            let mut v = _mm512_add_epi32(av[h], corr);
            if let Some(rs) = rowsums {
                v = _mm512_sub_epi32(v, _mm512_mullo_epi32(wzp, _mm512_set1_epi32(rs[r])));
            }
            // SAFETY: row r's lanes 16h .. 16h + n lie in its destination (caller).
            unsafe {
                let d = dst.add(r * row_bytes + 16 * h * es);
                match q.out {
                    QOut::I32 => _mm512_mask_storeu_epi32(d as *mut i32, mask, v),
                    QOut::F32 => _mm512_mask_storeu_ps(
                        d as *mut f32,
                        mask,
                        _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), scale), fbias),
                    ),
                    QOut::U8 | QOut::I8 => _mm_mask_storeu_epi8(
                        d as *mut i8,
                        mask,
                        _mm512_cvtepi32_epi8(requant::requantize16(v, scale, &bounds)),
                    ),
                }
            }
        });
    }
}
