//! AVX2+FMA kernels of the blocked convolution: the GEMM register tile (up to 6 output
//! positions × 2 output blocks, 12 ymm accumulators; per input channel two weight loads and
//! one broadcast per position), looped over a run of positions.

use super::{CB, PANEL, ROWS, Run, ZEROS};
use std::arch::x86_64::*;

/// All register tiles of a run: full tiles of 6 positions, then one of the rest.
///
/// # Safety
/// AVX2 and FMA present; as `Run`'s fields say.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn positions(t: &Run) {
    // SAFETY: forwarded.
    unsafe {
        match (t.blocks == 2, t.run == CB && t.step == 1) {
            (true, true) => positions_of::<2, true>(t),
            (false, true) => positions_of::<1, true>(t),
            (true, false) => positions_of::<2, false>(t),
            (false, false) => positions_of::<1, false>(t),
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn positions_of<const V: usize, const BLOCKED: bool>(t: &Run) {
    let n = t.origins.len();
    let mut q = 0;
    // A last tile of 1-3 positions has too few accumulator chains to keep both FMA pipes
    // busy (a 7×7 output is 8 tiles of 6 and one of 1): it and the full tile before it become
    // two tiles of 4-5 positions.
    let rem = n % ROWS;
    let full_end = if n > ROWS && (1..=3).contains(&rem) {
        n - rem - ROWS
    } else {
        n - rem
    };
    // SAFETY: forwarded; tiles q..q+R of the run.
    unsafe {
        while q < full_end {
            tile::<ROWS, V, BLOCKED>(t, q);
            q += ROWS;
        }
        match n - q {
            9 => {
                tile::<5, V, BLOCKED>(t, q);
                tile::<4, V, BLOCKED>(t, q + 5);
            }
            8 => {
                tile::<4, V, BLOCKED>(t, q);
                tile::<4, V, BLOCKED>(t, q + 4);
            }
            7 => {
                tile::<4, V, BLOCKED>(t, q);
                tile::<3, V, BLOCKED>(t, q + 4);
            }
            5 => tile::<5, V, BLOCKED>(t, q),
            4 => tile::<4, V, BLOCKED>(t, q),
            3 => tile::<3, V, BLOCKED>(t, q),
            2 => tile::<2, V, BLOCKED>(t, q),
            1 => tile::<1, V, BLOCKED>(t, q),
            _ => {}
        }
    }
}

/// The tile of positions `q..q+R`: with the taps checked (`kernel::<…, true>`) when the
/// run has a border and a window of the tile leaves the input.
///
/// # Safety
/// As `kernel`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile<const R: usize, const V: usize, const BLOCKED: bool>(t: &Run, q: usize) {
    let inside = match &t.border {
        Some(b) => b.inside[q..q + R].iter().all(|&i| i),
        None => true,
    };
    // SAFETY: forwarded; a border run reads a blocked input (`pads_in_kernel`).
    unsafe {
        if inside {
            kernel::<R, V, BLOCKED, false>(t, q)
        } else {
            kernel::<R, V, true, true>(t, q)
        }
    }
}

/// The tile of positions `q..q+R`; `BLOCKED`: entries of 8 k steps at stride 1
/// (unrolled), otherwise the run's `run` and `step` (plain input). `CHECKED`: each
/// position's entries whose tap leaves the input (`Border`) read zeros instead.
///
/// # Safety
/// AVX2 and FMA present; as `Run`'s fields say; `CHECKED` only with a border and `BLOCKED`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn kernel<const R: usize, const V: usize, const BLOCKED: bool, const CHECKED: bool>(
    t: &Run,
    q: usize,
) {
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    let mut wp = t.w;
    let pos: [*const f32; R] = std::array::from_fn(|r| t.x.wrapping_offset(t.origins[q + r]));
    let corners: [[isize; 2]; R] = std::array::from_fn(|r| match (CHECKED, &t.border) {
        (true, Some(b)) => b.corner(q + r),
        _ => [0, 0],
    });
    let (run, step) = if BLOCKED { (CB, 1) } else { (t.run, t.step) };
    let y = t.y.wrapping_add(q * CB);
    // SAFETY: every position offset plus entry offset plus i·step (i < run) is readable,
    // or (CHECKED) replaced by the zeros where its tap leaves the input; the panel holds
    // offs.len() × run rows of 16 floats; the tile lies inside the output.
    unsafe {
        for (e, &o) in t.offs.iter().enumerate() {
            let src: [*const f32; R] = std::array::from_fn(|r| match (CHECKED, &t.border) {
                (true, Some(b)) if !b.tap_inside(corners[r], e) => ZEROS.as_ptr(),
                _ => pos[r].wrapping_offset(o),
            });
            for i in 0..run {
                let b: [__m256; V] = std::array::from_fn(|v| _mm256_loadu_ps(wp.add(v * CB)));
                for (r, accr) in acc.iter_mut().enumerate() {
                    let a = _mm256_broadcast_ss(&*src[r].add(i * step));
                    for v in 0..V {
                        accr[v] = _mm256_fmadd_ps(a, b[v], accr[v]);
                    }
                }
                wp = wp.add(PANEL);
            }
        }
        for v in 0..V {
            let (bias, lo, hi) = match &t.ep {
                Some(e) => (
                    if e.bias.is_null() {
                        _mm256_setzero_ps()
                    } else {
                        _mm256_loadu_ps(e.bias.add(v * CB))
                    },
                    _mm256_set1_ps(e.lo),
                    _mm256_set1_ps(e.hi),
                ),
                None => (
                    _mm256_setzero_ps(),
                    _mm256_setzero_ps(),
                    _mm256_setzero_ps(),
                ),
            };
            for (r, accr) in acc.iter().enumerate() {
                let at = v * t.oplane + r * CB;
                let mut s = accr[v];
                if t.accumulate {
                    s = _mm256_add_ps(s, _mm256_loadu_ps(y.add(at)));
                }
                if let Some(e) = &t.ep {
                    s = _mm256_add_ps(s, bias);
                    if !e.residual.is_null() {
                        s = _mm256_add_ps(s, _mm256_loadu_ps(e.residual.add(q * CB + at)));
                    }
                    s = _mm256_min_ps(hi, _mm256_max_ps(lo, s));
                }
                _mm256_storeu_ps(y.add(at), s);
            }
        }
    }
}
