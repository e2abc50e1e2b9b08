//! Packing one panel of the im2col matrix: `NR` output positions × `K` (channel, tap) rows of
//! uint8 activations, laid out `[k/4][NR][4]` for the four-way dot products. Padding (and
//! lanes past the output) read the zero point; rows past `K` are zero (their weights are
//! zero). int8 activations are flipped to uint8 (`x ^ 0x80 = x + 128`).

use super::{Dims, NR, QConvParams};

/// Fills `panel` (`k4 · 4 · NR` bytes) with the positions `p0 .. p0 + lanes` of the group
/// whose first input plane is at `x`.
///
/// # Safety
/// `x` points to the group's `cg` input planes.
pub(super) unsafe fn pack_panel(
    p: &QConvParams,
    d: &Dims,
    x: *const u8,
    p0: usize,
    lanes: usize,
    panel: &mut [u8],
) {
    let g = &p.conv;
    let nsp = g.input.len();
    let zx = p.q.x_zp as u8;
    let flip = if p.q.x_signed { 0x80u8 } else { 0 };
    // The output coordinates of each lane, in runs along the last dim: (first lane, lanes,
    // outer output coordinates, last-dim output coordinate of the first lane).
    let last = nsp - 1;
    let ow = g.output[last] as usize;
    let mut runs: [(usize, usize, [i64; crate::conv::MAX_SPATIAL]); NR] =
        [(0, 0, [0; crate::conv::MAX_SPATIAL]); NR];
    let mut nruns = 0;
    let mut lane = 0;
    while lane < lanes {
        let pos = p0 + lane;
        let mut coord = [0i64; crate::conv::MAX_SPATIAL];
        let mut rest = pos;
        for dd in (0..nsp).rev() {
            let e = g.output[dd] as usize;
            coord[dd] = (rest % e) as i64;
            rest /= e;
        }
        let len = (ow - coord[last] as usize).min(lanes - lane);
        runs[nruns] = (lane, len, coord);
        nruns += 1;
        lane += len;
    }
    let mut rows = [[0u8; NR]; 4];
    let mut tapc = [0i64; crate::conv::MAX_SPATIAL];
    for k4 in 0..d.k4 {
        for (j, row) in rows.iter_mut().enumerate() {
            let k = k4 * 4 + j;
            if k >= d.k {
                *row = [0; NR];
                continue;
            }
            row.fill(zx);
            let (c, mut tap) = (k / d.taps, k % d.taps);
            for dd in (0..nsp).rev() {
                let e = g.kernel[dd] as usize;
                tapc[dd] = (tap % e) as i64;
                tap /= e;
            }
            // SAFETY: plane `c` of the group lies at `x`.
            let plane = unsafe { x.add(c * d.isize) };
            for &(l0, len, ref oc) in &runs[..nruns] {
                // The input row this run reads: every dim but the last, inside the input.
                let mut off = 0usize;
                let mut inside = true;
                for dd in 0..last {
                    let i = oc[dd] * g.strides[dd] + tapc[dd] * g.dilations[dd] - g.pads[dd];
                    if i < 0 || i >= g.input[dd] {
                        inside = false;
                        break;
                    }
                    off = off * g.input[dd] as usize + i as usize;
                }
                if !inside {
                    continue;
                }
                let iw = g.input[last];
                let (s, start) = (
                    g.strides[last],
                    oc[last] * g.strides[last] + tapc[last] * g.dilations[last] - g.pads[last],
                );
                // Lanes whose input column is inside: start + s·t in [0, iw).
                let t0 = if start < 0 { (-start + s - 1) / s } else { 0 };
                let t1 = if start >= iw {
                    0
                } else {
                    (((iw - 1 - start) / s) + 1).min(len as i64)
                };
                if t0 >= t1 {
                    continue;
                }
                let base = off * iw as usize;
                let dst = &mut row[l0 + t0 as usize..l0 + t1 as usize];
                if s == 1 {
                    let from = (base as i64 + start + t0) as usize;
                    // SAFETY: columns start + t0 .. start + t1 lie inside the input row.
                    let src = unsafe { std::slice::from_raw_parts(plane.add(from), dst.len()) };
                    dst.copy_from_slice(src);
                } else {
                    for (t, v) in dst.iter_mut().enumerate() {
                        let col = start + (t0 + t as i64) * s;
                        // SAFETY: col lies inside the input row (t0 ≤ t < t1).
                        *v = unsafe { *plane.add(base + col as usize) };
                    }
                }
            }
            if flip != 0 {
                for v in row.iter_mut() {
                    *v ^= flip;
                }
            }
        }
        // Rows past K are zero, and stay zero after the flip.
        for j in 0..4 {
            if k4 * 4 + j >= d.k {
                rows[j] = [0; NR];
            }
        }
        interleave(&rows, &mut panel[k4 * 4 * NR..(k4 + 1) * 4 * NR]);
    }
}

/// `out[l·4 + j] = rows[j][l]`.
fn interleave(rows: &[[u8; NR]; 4], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        assert!(out.len() == 4 * NR);
        // SAFETY: SSE2 is part of x86-64; every load and store is inside `rows` and `out`
        // (NR = 32: two 16-byte halves, four 16-byte stores each).
        unsafe {
            for h in 0..NR / 16 {
                let ld = |j: usize| _mm_loadu_si128(rows[j].as_ptr().add(h * 16) as *const __m128i);
                let (a, b, c, e) = (ld(0), ld(1), ld(2), ld(3));
                let ab_lo = _mm_unpacklo_epi8(a, b);
                let ab_hi = _mm_unpackhi_epi8(a, b);
                let ce_lo = _mm_unpacklo_epi8(c, e);
                let ce_hi = _mm_unpackhi_epi8(c, e);
                let o = out.as_mut_ptr().add(h * 64) as *mut __m128i;
                _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, ce_lo));
                _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, ce_lo));
                _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, ce_hi));
                _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, ce_hi));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for l in 0..NR {
        for j in 0..4 {
            out[l * 4 + j] = rows[j][l];
        }
    }
}

/// `colsum[l] = Σ_k panel[k][l]` (rows past K are zero).
pub(super) fn column_sums(panel: &[u8], k4: usize, colsum: &mut [i32; NR]) {
    *colsum = [0; NR];
    for g in panel[..k4 * 4 * NR].chunks_exact(4 * NR) {
        for (l, s) in colsum.iter_mut().enumerate() {
            let b = &g[l * 4..l * 4 + 4];
            *s += b[0] as i32 + b[1] as i32 + b[2] as i32 + b[3] as i32;
        }
    }
}
